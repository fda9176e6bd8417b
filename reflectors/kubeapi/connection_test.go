package kubeapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
)

// refused is the error a client returns when nothing listens at the API
// server's address.
func refused(path string) error {
	return &url.Error{Op: "Get", URL: "https://127.0.0.1:6443" + path, Err: &net.OpError{
		Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
}

// reports records what a Connection reports.
type reports struct {
	mu  sync.Mutex
	log []string
}

func (r *reports) Connected() { r.add("connected") }
func (r *reports) Disconnected(err error) {
	r.add("disconnected: " + err.Error())
}

func (r *reports) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, s)
}

func (r *reports) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.log, "\n")
}

func (r *reports) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.log) == 0 {
		return ""
	}
	return r.log[len(r.log)-1]
}

// Only a call the API server did not answer (transport errors, 502, 503)
// is retried in place; 401 and server errors count as disconnected but
// are the reflector's to retry; answers the reflector handles as part of
// its protocol (gone, too many requests, a lagging API server's too
// large resource version) and answers about one resource or object
// (forbidden, not found) count as neither.
func TestUnavailableAndRefusedErrors(t *testing.T) {
	gr := schema.GroupResource{Resource: "services"}
	tooLarge := apierrors.NewTimeoutError("Too large resource version: 10, current: 5", 1)
	tooLarge.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge}}
	for _, tc := range []struct {
		err                  error
		unavailable, refused bool
	}{
		{refused("/api/v1/services"), true, false},
		{fmt.Errorf("list: %w", refused("/api/v1/services")), true, false},
		{io.ErrUnexpectedEOF, true, false},
		{apierrors.NewServiceUnavailable("starting"), true, false},
		{apierrors.NewGenericServerResponse(502, "get", gr, "", "bad gateway", 0, false), true, false},
		{apierrors.NewUnauthorized("token expired"), false, true},
		{apierrors.NewForbidden(gr, "", errors.New("RBAC")), false, false},
		{apierrors.NewInternalError(errors.New("etcd")), false, true},
		{apierrors.NewGone("too old"), false, false},
		{apierrors.NewResourceExpired("too old"), false, false},
		{apierrors.NewTooManyRequests("slow down", 1), false, false},
		{apierrors.NewNotFound(gr, ""), false, false},
		{tooLarge, false, false},
		{errors.New("unable to decode"), false, false},
	} {
		if got := Unavailable(tc.err); got != tc.unavailable {
			t.Errorf("Unavailable(%v) = %v", tc.err, got)
		}
		if got := Refused(tc.err); got != tc.refused {
			t.Errorf("Refused(%v) = %v", tc.err, got)
		}
	}
}

// A list the API server does not answer is tried again in place until
// it answers: the caller (the reflector) gets the list, not the error,
// and the source is told disconnected at each failure, then connected.
func TestListRetriedInPlaceUntilTheServerAnswers(t *testing.T) {
	rep := &reports{}
	conn := NewConnection(rep)
	conn.retryMin, conn.retryMax = time.Millisecond, 2*time.Millisecond
	var calls atomic.Int32
	lw := conn.ListWatch(nil, func(context.Context, metav1.ListOptions) (runtime.Object, error) {
		if calls.Add(1) <= 5 {
			return nil, refused("/api/v1/services")
		}
		return &metav1.List{}, nil
	}, nil)
	if _, err := lw.List(metav1.ListOptions{}); err != nil {
		t.Fatalf("List: %v", err)
	}
	want := strings.Repeat("disconnected: "+refused("/api/v1/services").Error()+"\n", 5) + "connected"
	if got := rep.String(); got != want {
		t.Fatalf("reports:\n%s\nwant:\n%s", got, want)
	}
}

// A refused call (401) is returned to the reflector, counts as
// disconnected, and the next success reconnects; a call that fails when
// its informer stops (ctx done) says nothing.
func TestRefusedCallReturnedAndCounted(t *testing.T) {
	rep := &reports{}
	conn := NewConnection(rep)
	unauthorized := apierrors.NewUnauthorized("token expired")
	fail := true
	lw := conn.ListWatch(nil, func(ctx context.Context, _ metav1.ListOptions) (runtime.Object, error) {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if fail {
			return nil, unauthorized
		}
		return &metav1.List{}, nil
	}, nil)
	if _, err := lw.List(metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Fatalf("List: %v, want unauthorized", err)
	}
	fail = false
	if _, err := lw.List(metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err == nil {
		t.Fatal("a cancelled list succeeded")
	}
	if got, want := rep.String(), "disconnected: "+unauthorized.Error()+"\nconnected"; got != want {
		t.Fatalf("reports:\n%s\nwant:\n%s", got, want)
	}
}

// With several informers, the source is connected once each has listed,
// disconnected while any fails (showing the latest failing call's
// error), and connected when the last one recovers.
func TestConnectedOnlyWhenEveryInformerIs(t *testing.T) {
	gvrA := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "as"}
	gvrB := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "bs"}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvrA: "AList", gvrB: "BList"})
	var (
		mu   sync.Mutex
		down = map[string]bool{"bs": true}
	)
	fail := func(a k8stesting.Action) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		if down[a.GetResource().Resource] {
			return true, refused("/apis/example.com/v1/" + a.GetResource().Resource)
		}
		return false, nil
	}
	dyn.PrependReactor("list", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		handled, err := fail(a)
		return handled, nil, err
	})
	rep := &reports{}
	conn := NewConnection(rep)
	a, releaseA := dynamicInformer(conn, dyn, gvrA)
	b, releaseB := dynamicInformer(conn, dyn, gvrB)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { a.RunWithContext(ctx) })
	wg.Go(func() { b.RunWithContext(ctx) })
	defer func() {
		cancel()
		wg.Wait()
		releaseA()
		releaseB()
	}()
	eventually(t, "a synced", a.HasSynced)
	eventually(t, "b reported failing", func() bool { return strings.Contains(rep.last(), "bs") })
	if slices.Contains(strings.Split(rep.String(), "\n"), "connected") {
		t.Fatalf("reported connected while b has never listed:\n%s", rep)
	}
	mu.Lock()
	down["bs"] = false
	mu.Unlock()
	eventually(t, "b synced", b.HasSynced)
	eventually(t, "connected", func() bool { return rep.last() == "connected" })
	if _, err := dyn.Resource(gvrA).Namespace("ns").Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "A", "metadata": map[string]any{"name": "x", "namespace": "ns"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a's informer sees the new object", func() bool { return len(a.GetStore().List()) == 1 })
}

// The error shown is the latest of the call failing the longest, so it
// changes when what fails changes, not at each retry of another call.
func TestDisconnectionShowsTheLongestFailingCall(t *testing.T) {
	rep := &reports{}
	conn := NewConnection(rep)
	for _, step := range []struct {
		key string
		err string
	}{{"a", "a1"}, {"b", "b1"}, {"b", "b2"}, {"a", "a2"}, {"a", ""}, {"b", ""}} {
		var err error
		if step.err != "" {
			err = errors.New(step.err)
		}
		conn.settle(step.key, err)
	}
	want := "disconnected: a1\ndisconnected: a1\ndisconnected: a1\ndisconnected: a2\ndisconnected: b2\nconnected"
	if got := rep.String(); got != want {
		t.Fatalf("reports:\n%s\nwant:\n%s", got, want)
	}
}
