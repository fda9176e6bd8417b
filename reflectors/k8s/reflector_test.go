package k8s

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/lbstate/lbstate/internal/smallset"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

func TestConvertPod(t *testing.T) {
	node := lb.Node{Name: "n1"}
	pod := func(mod func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{
				Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}},
			}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.0.0.5"}, {IP: "fd00::5"}}},
		}
		if mod != nil {
			mod(p)
		}
		return p
	}
	params, bes, ok, err := ConvertPod(pod(nil), node)
	if err != nil || !ok || len(params.Frontends) != 2 || len(bes) != 2 {
		t.Fatalf("dual-stack pod: ok=%v err=%v frontends=%v backends=%v", ok, err, params.Frontends, bes)
	}
	for name, mod := range map[string]func(*corev1.Pod){
		"other node":   func(p *corev1.Pod) { p.Spec.NodeName = "n2" },
		"host network": func(p *corev1.Pod) { p.Spec.HostNetwork = true },
		"no IP yet":    func(p *corev1.Pod) { p.Status.PodIPs = nil },
		"finished":     func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded },
		"no host port": func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].HostPort = 0 },
	} {
		if _, _, ok, err := ConvertPod(pod(mod), node); ok || err != nil {
			t.Errorf("%s: ok=%v err=%v, want ignored", name, ok, err)
		}
	}
	_, _, _, err = ConvertPod(pod(func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].HostIP = "nope" }), node)
	if err == nil || err.Error()[:6] != "pod ns" {
		t.Errorf("bad hostIP: %v", err)
	}
}

// 10,000 services with a slice each, listed at start: once the tables are
// initialized every frontend is there with exactly its own backend.
func TestReflectorTenThousandServices(t *testing.T) {
	const n = 10000
	r, w, db, feed := newClientReflector(t, "node-1", scaleObjects(n)...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	go r.Run(ctx, feed)

	_, initialized := w.Frontends().Initialized(db.ReadTxn())
	select {
	case <-initialized:
	case <-time.After(60 * time.Second):
		t.Fatal("tables not initialized after 60s")
	}
	t.Logf("%d services and slices applied in %s", n, time.Since(start))
	txn := db.ReadTxn()
	if got := w.Frontends().NumObjects(txn); got != n {
		t.Fatalf("%d frontends, want %d", got, n)
	}
	for i := range n {
		fe, _, found := w.Frontends().Get(txn, tables.FrontendByAddress.Query(
			lb.MustParseL3n4Addr(fmt.Sprintf("10.96.%d.%d:80/TCP", i/256, i%256))))
		want := fmt.Sprintf("10.1.%d.%d:8080/TCP", i/256, i%256)
		if !found || fe.Service.Name() != fmt.Sprintf("svc-%d", i) || len(fe.Backends) != 1 || fe.Backends[0].Address.String() != want {
			t.Fatalf("service %d: frontend %+v, want backend %s", i, fe, want)
		}
	}
	if r.src.Errors() != 0 {
		t.Fatalf("%d errors", r.src.Errors())
	}
}

// The reflector's own state follows slices that move between services and
// go away: nothing is left of a service once its last slice is deleted,
// and the backends follow.
func TestReflectorForgetsDeletedSlices(t *testing.T) {
	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := newTestReflector(t, DefaultConfig, w)
	a1, a2, moved := labelledSlice("a-2", "a", "10.0.0.2"), labelledSlice("a-1", "a", "10.0.0.1"), labelledSlice("a-2", "b", "10.0.0.2")
	r.apply([]event{{obj: a1}, {obj: a2}})
	a := r.services["ns/a"]
	if got := slices.Collect(a.slices()); len(got) != 2 || got[0].Name != "a-1" || got[1].Name != "a-2" {
		t.Fatalf("service a: slices %v, want a-1 and a-2 in order", got)
	}
	r.apply([]event{{obj: moved}})
	a, b := r.services["ns/a"], r.services["ns/b"]
	if len(slices.Collect(a.slices())) != 1 || len(slices.Collect(b.slices())) != 1 {
		t.Fatalf("after a-2 moved to b: %v", r.services)
	}
	r.apply([]event{{obj: moved, deleted: true}, {obj: a2, deleted: true}})
	if len(r.services) != 0 || len(r.slices) != 0 {
		t.Fatalf("after deleting every slice the reflector still holds %v and %v", r.services, r.slices)
	}
	if n := w.Backends().NumObjects(db.ReadTxn()); n != 0 {
		t.Fatalf("%d backends left", n)
	}
}

// A slice belongs to the service its label names, whatever its own name
// says (the reflector finds most slices through their names, which the
// EndpointSlice controller makes SERVICE-xxxxx): slices named after
// another service, or with no service in their name, move with their
// label and are forgotten when deleted, and each service's backends are
// its slices' alone, in every batch split.
func TestSliceBelongsToItsLabelWhateverItsName(t *testing.T) {
	steps := [][]event{
		{{obj: labelledSlice("a-x1", "a", "10.0.0.1")}, {obj: labelledSlice("b-x1", "a", "10.0.0.2")}, {obj: labelledSlice("plain", "a", "10.0.0.3")}},
		{{obj: labelledSlice("a-x1", "b", "10.0.0.1")}, {obj: labelledSlice("b-x1", "b", "10.0.0.2")}},
		{{obj: labelledSlice("plain", "b", "10.0.0.3")}, {obj: labelledSlice("b-x1", "a", "10.0.0.4")}},
		{{obj: labelledSlice("a-x1", "a", "10.0.0.1"), deleted: true}, {obj: labelledSlice("b-x1", "b", "10.0.0.4"), deleted: true}, {obj: labelledSlice("plain", "a", ""), deleted: true}},
	}
	want := []map[string][]string{
		{"a": {"10.0.0.1:80/TCP", "10.0.0.2:80/TCP", "10.0.0.3:80/TCP"}},
		{"a": {"10.0.0.3:80/TCP"}, "b": {"10.0.0.1:80/TCP", "10.0.0.2:80/TCP"}},
		{"a": {"10.0.0.4:80/TCP"}, "b": {"10.0.0.1:80/TCP", "10.0.0.3:80/TCP"}},
		{},
	}
	for _, split := range []bool{false, true} {
		db := statedb.New()
		w, err := tables.New(db, nil)
		if err != nil {
			t.Fatal(err)
		}
		r := newTestReflector(t, DefaultConfig, w)
		for i, step := range steps {
			if split { // one event a batch
				for _, ev := range step {
					r.apply([]event{ev})
				}
			} else {
				r.apply(step)
			}
			for _, svc := range []string{"a", "b"} {
				var got []string
				for be := range w.BackendsOf(db.ReadTxn(), lb.NewServiceName("ns", svc)) {
					got = append(got, be.Address.String())
				}
				if !slices.Equal(got, want[i][svc]) {
					t.Errorf("split %v, step %d: service %s has backends %v, want %v", split, i, svc, got, want[i][svc])
				}
			}
		}
		if len(r.services) != 0 || len(r.slices) != 0 || r.nSlices != 0 {
			t.Errorf("split %v: after deleting every slice the reflector still holds %v, %v and %d slices", split, r.services, r.slices, r.nSlices)
		}
	}
}

// A service's backends merge its slices: an address in two slices is one
// backend, in its better state, whether the merge searches (a few
// backends) or indexes them (more than smallset.Max), and whether the
// bits that spare the search (addrBit) are few or all set (200).
func TestBackendsOfMergesSlices(t *testing.T) {
	for _, n := range []int{3, smallset.Max + 8, 200} {
		w, err := tables.New(statedb.New(), nil)
		if err != nil {
			t.Fatal(err)
		}
		r := newTestReflector(t, DefaultConfig, w)
		port, yes, no := int32(80), true, false
		slice := func(name string, ready, terminating *bool, first, last int) *discoveryv1.EndpointSlice {
			es := &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{LabelServiceName: "svc"}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports:       []discoveryv1.EndpointPort{{Port: &port}},
			}
			for i := first; i <= last; i++ {
				es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
					Addresses:  []string{fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)},
					Conditions: discoveryv1.EndpointConditions{Ready: ready, Serving: &yes, Terminating: terminating},
				})
			}
			return es
		}
		// a: 0..n-1 terminating; b: n/2..n+n/2-1 ready. The overlap is
		// ready.
		r.apply([]event{{obj: slice("a", &no, &yes, 0, n-1)}, {obj: slice("b", &yes, &no, n/2, n+n/2-1)}})
		e := r.services["ns/svc"]
		got := r.backendsOf(&e)
		if len(got) != n+n/2 {
			t.Fatalf("n=%d: %d backends, want %d", n, len(got), n+n/2)
		}
		seen := map[lb.L3n4Addr]bool{}
		for i, b := range got {
			if seen[b.Address] {
				t.Fatalf("n=%d: %s twice", n, b.Address)
			}
			seen[b.Address] = true
			if ready := i >= n/2; ready != (b.State == lb.BackendActive) {
				t.Errorf("n=%d: backend %d (%s) state %s", n, i, b.Address, b.State)
			}
		}
	}
}

// An address listed twice in one slice is one backend, in its better
// state, wherever the two are in the slice.
func TestBackendsOfMergesAnAddressListedTwiceInASlice(t *testing.T) {
	w, err := tables.New(statedb.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := newTestReflector(t, DefaultConfig, w)
	port, yes, no := int32(80), true, false
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "a", Namespace: "ns", Labels: map[string]string{LabelServiceName: "svc"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Port: &port}},
	}
	for i := range 10 {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.0.0.%d", i+1)},
			Conditions: discoveryv1.EndpointConditions{Ready: &no, Serving: &yes, Terminating: &yes},
		})
	}
	es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{ // 10.0.0.4 again, ready
		Addresses:  []string{"10.0.0.4"},
		Conditions: discoveryv1.EndpointConditions{Ready: &yes},
	})
	r.apply([]event{{obj: es}})
	e := r.services["ns/svc"]
	got := r.backendsOf(&e)
	if len(got) != 10 {
		t.Fatalf("%d backends, want 10: %v", len(got), got)
	}
	for _, b := range got {
		if want := b.Address.Addr() == netip.MustParseAddr("10.0.0.4"); want != (b.State == lb.BackendActive) {
			t.Errorf("backend %s state %s", b.Address, b.State)
		}
	}
}

// runFedReflector starts a fed reflector for node n1 over new tables.
func runFedReflector(t *testing.T) (*Reflector, *tables.Writer, *statedb.DB) {
	t.Helper()
	w, db, cfg := newTestTables(t, "n1")
	r := newTestReflector(t, cfg, w)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go r.Run(ctx, func(context.Context) error { return nil }) // the test pushes
	return r, w, db
}

// waitApplied pushes a marker service and waits until it is in the
// tables, so that everything pushed before it has been applied.
func waitApplied(t *testing.T, r *Reflector, w *tables.Writer, db *statedb.DB, n int) {
	t.Helper()
	name := fmt.Sprintf("barrier-%d", n)
	r.Push(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "zz", Name: name},
		Spec: corev1.ServiceSpec{ClusterIP: fmt.Sprintf("10.255.0.%d", n+1),
			Ports: []corev1.ServicePort{{Port: 80}}},
	}, false)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, _, ok := w.Services().Get(db.ReadTxn(), tables.ServiceByName.Query(lb.NewServiceName("zz", name))); ok {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("barrier not applied")
}

// Run returns once ctx is done, also when the informers' handlers are
// blocked on a full event channel (the loop no longer reads it).
func TestRunReturnsWithFullEventChannel(t *testing.T) {
	const n = 15000
	r, w, db, feed := newClientReflector(t, "n1", scaleObjects(n)...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, feed) }()
	deadline := time.Now().Add(30 * time.Second)
	for len(r.events) < cap(r.events) {
		if time.Now().After(deadline) {
			t.Fatal("nothing applied in 30s")
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("channel %d/%d at cancel, %d services applied", len(r.events), cap(r.events), w.Services().NumObjects(db.ReadTxn()))
	cancel()
	select {
	case <-done:
		time.Sleep(200 * time.Millisecond)
		t.Logf("returned; %d services applied, channel %d", w.Services().NumObjects(db.ReadTxn()), len(r.events))
	case <-time.After(15 * time.Second):
		t.Fatalf("Run did not return 15s after ctx was cancelled (%d of %d services applied)",
			w.Services().NumObjects(db.ReadTxn()), n)
	}
}

// scaleObjects returns n services in namespace scale, each with one
// EndpointSlice of one endpoint.
func scaleObjects(n int) []runtime.Object {
	objs := make([]runtime.Object, 0, 2*n)
	for i := range n {
		name := fmt.Sprintf("svc-%d", i)
		objs = append(objs, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "scale"},
			Spec: corev1.ServiceSpec{
				ClusterIP: fmt.Sprintf("10.96.%d.%d", i/256, i%256),
				Ports:     []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
			},
		})
		port, proto, pname := int32(8080), corev1.ProtocolTCP, "http"
		objs = append(objs, &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: name + "-1", Namespace: "scale", Labels: map[string]string{LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &pname, Port: &port, Protocol: &proto}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{fmt.Sprintf("10.1.%d.%d", i/256, i%256)}}},
		})
	}
	return objs
}

// newClientReflector returns a reflector for node and its feed from a fake client
// holding objs, and new tables; the caller runs it.
func newClientReflector(t *testing.T, node string, objs ...runtime.Object) (*Reflector, *tables.Writer, *statedb.DB, func(context.Context) error) {
	t.Helper()
	w, db, cfg := newTestTables(t, node)
	r := newTestReflector(t, cfg, w)
	return r, w, db, r.WatchAPI(fake.NewClientset(objs...))
}

// newTestTables returns new tables and a reflector configuration for node.
func newTestTables(t *testing.T, node string) (*tables.Writer, *statedb.DB, Config) {
	t.Helper()
	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig
	cfg = cfg.WithNode(node)
	return w, db, cfg
}

// labelledSlice is an IPv4 slice in namespace ns named name, labelled as
// svc's, with one endpoint at ip on port 80.
func labelledSlice(name, svc, ip string) *discoveryv1.EndpointSlice {
	port := int32(80)
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Port: &port}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}}},
	}
}
