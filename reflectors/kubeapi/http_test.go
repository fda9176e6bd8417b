package kubeapi

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// tinyAPI serves Services the way an API server does, over HTTP, for as
// much as an informer asks: a list, a watch from a resource version, and
// a watch list (the initial objects, then a bookmark). It keeps its
// objects across restarts of its listener, as etcd would.
type tinyAPI struct {
	mu       sync.Mutex
	rv       int
	services map[string]*corev1.Service
	watchers map[chan *corev1.Service]struct{}
}

func (a *tinyAPI) put(name, ip string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rv++
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{Kind: "Service", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: strconv.Itoa(a.rv)},
		Spec:       corev1.ServiceSpec{ClusterIP: ip},
	}
	a.services[name] = svc
	for ch := range a.watchers {
		ch <- svc
	}
}

func (a *tinyAPI) watching() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.watchers)
}

func (a *tinyAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v1/services" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	q := r.URL.Query()
	a.mu.Lock()
	if q.Get("watch") != "true" {
		list := corev1.ServiceList{TypeMeta: metav1.TypeMeta{Kind: "ServiceList", APIVersion: "v1"},
			ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(a.rv)}}
		for _, svc := range a.services {
			list.Items = append(list.Items, *svc)
		}
		a.mu.Unlock()
		_ = json.NewEncoder(w).Encode(list)
		return
	}
	// What the watch starts with: every object (a watch list) or those
	// changed since its resource version.
	from, _ := strconv.Atoi(q.Get("resourceVersion"))
	initial := q.Get("sendInitialEvents") == "true"
	var first []watch.Event
	for _, svc := range a.services {
		if rv, _ := strconv.Atoi(svc.ResourceVersion); initial || rv > from {
			first = append(first, watch.Event{Type: watch.Added, Object: svc})
		}
	}
	if initial {
		first = append(first, watch.Event{Type: watch.Bookmark, Object: &corev1.Service{
			TypeMeta: metav1.TypeMeta{Kind: "Service", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{ResourceVersion: strconv.Itoa(a.rv),
				Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}},
		}})
	}
	ch := make(chan *corev1.Service, 16)
	a.watchers[ch] = struct{}{}
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.watchers, ch)
		a.mu.Unlock()
	}()
	enc := json.NewEncoder(w)
	send := func(ev watch.Event) bool {
		if err := enc.Encode(map[string]any{"type": ev.Type, "object": ev.Object}); err != nil {
			return false
		}
		w.(http.Flusher).Flush()
		return true
	}
	for _, ev := range first {
		if !send(ev) {
			return
		}
	}
	w.(http.Flusher).Flush()
	for {
		select {
		case <-r.Context().Done(): // the connection closed: the server was killed
			return
		case svc := <-ch:
			if !send(watch.Event{Type: watch.Modified, Object: svc}) {
				return
			}
		}
	}
}

// serve serves api on addr ("127.0.0.1:0" for any port) until the
// returned server is closed, which ends every connection as a killed
// process does, and returns the address it listens on.
func serve(t *testing.T, api *tinyAPI, addr string) (*http.Server, string) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: api}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return srv, l.Addr().String()
}

// Over real HTTP: when the API server's listener and connections close,
// the informer's calls fail with real transport errors, which are
// retried in place and reported as a disconnection; a change made
// meanwhile reaches the informer within 2s of a new listener on the same
// address.
func TestRealListenerClosedAndReopened(t *testing.T) {
	api := &tinyAPI{services: map[string]*corev1.Service{}, watchers: map[chan *corev1.Service]struct{}{}}
	api.put("web", "10.96.0.10")
	srv, addr := serve(t, api, "127.0.0.1:0")
	client, err := kubernetes.NewForConfig(&rest.Config{Host: "http://" + addr,
		ContentConfig: rest.ContentConfig{ContentType: runtime.ContentTypeJSON, AcceptContentTypes: runtime.ContentTypeJSON}})
	if err != nil {
		t.Fatal(err)
	}
	rep := &reports{}
	conn := NewConnection(rep)
	f := NewInformers(conn, client, nil)
	services := client.CoreV1().Services("")
	inf := f.Informer(corev1.SchemeGroupVersion.WithResource("services"), &corev1.Service{},
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return services.List(ctx, o) },
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return services.Watch(ctx, o)
		})
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		f.Shutdown()
	})
	clusterIP := func() string {
		obj, ok, _ := inf.GetStore().GetByKey("ns/web")
		if !ok {
			return ""
		}
		return obj.(*corev1.Service).Spec.ClusterIP
	}
	eventually(t, "synced and watching", func() bool {
		return clusterIP() == "10.96.0.10" && rep.last() == "connected" && api.watching() == 1
	})

	time.Sleep(1200 * time.Millisecond) // a watch established for a while: client-go starts it again at once when it ends
	srv.Close()
	eventually(t, "disconnected", func() bool { return strings.HasPrefix(rep.last(), "disconnected: ") })
	if !strings.Contains(rep.last(), "connection refused") {
		t.Errorf("reported %q, want the refused connection", rep.last())
	}
	api.put("web", "10.96.0.99")
	time.Sleep(1500 * time.Millisecond) // an outage long enough for the retries to reach their longest interval

	serve(t, api, addr)
	back := time.Now()
	for clusterIP() != "10.96.0.99" {
		if time.Since(back) > 2*time.Second {
			t.Fatalf("change made during the outage not seen 2s after the listener returned; reports:\n%s", rep)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("change seen %s after the listener returned", time.Since(back))
	eventually(t, "connected again", func() bool { return rep.last() == "connected" })
}
