package k8s

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// An invalid update of a live EndpointSlice (a typo in its weights, its
// service label gone) is logged and counted once, and the slice's last
// valid version keeps serving until a valid one comes: bad input never
// drains a service. A typo ("10.3.0.6=2O") once dropped the frontend to
// no backends.
func TestInvalidSliceUpdateKeepsLastValidVersion(t *testing.T) {
	port := int32(8080)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Spec:       corev1.ServiceSpec{ClusterIP: "10.96.0.1", Ports: []corev1.ServicePort{{Port: 80}}},
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "ns",
			Labels:      map[string]string{LabelServiceName: "web"},
			Annotations: map[string]string{AnnotationWeights: "10.3.0.6=20"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Port: &port}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.3.0.6"}}, {Addresses: []string{"10.3.0.7"}}},
	}
	client := fake.NewClientset(svc, slice)
	w, db, cfg := newTestTables(t, "node-1")
	r := newTestReflector(t, cfg, w)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx, r.WatchAPI(client))

	fe := lb.MustParseL3n4Addr("10.96.0.1:80/TCP")
	backends := func() []string {
		f, _, found := w.Frontends().Get(db.ReadTxn(), tables.FrontendByAddress.Query(fe))
		if !found {
			return nil
		}
		var out []string
		for _, b := range f.Backends {
			out = append(out, b.String())
		}
		return out
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 10s (backends %q, %d errors)", what, backends(), r.src.Errors())
			}
		}
	}
	serving := []string{"10.3.0.6:8080/TCP (weight=20)", "10.3.0.7:8080/TCP"}
	waitFor("the slice applied", func() bool { return slices.Equal(backends(), serving) })

	update := func(mod func(*discoveryv1.EndpointSlice)) {
		t.Helper()
		es := slice.DeepCopy()
		mod(es)
		if _, err := client.DiscoveryV1().EndpointSlices("ns").Update(ctx, es, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i, mod := range []func(*discoveryv1.EndpointSlice){
		func(es *discoveryv1.EndpointSlice) { es.Annotations[AnnotationWeights] = "10.3.0.6=2O" },
		func(es *discoveryv1.EndpointSlice) { es.Annotations[AnnotationWeight] = "lots" },
		func(es *discoveryv1.EndpointSlice) { delete(es.Labels, LabelServiceName) },
	} {
		before := r.src.Errors()
		update(mod)
		waitFor("the invalid update reported", func() bool { return r.src.Errors() > before })
		if got := backends(); !slices.Equal(got, serving) {
			t.Fatalf("invalid update %d: backends %q, want the last valid ones %q", i, got, serving)
		}
	}

	// Another slice of the service comes: the service's backends are
	// derived again, with the last valid version of the first slice, and
	// its invalid version is not reported again.
	before := r.src.Errors()
	other := slice.DeepCopy()
	other.Name, other.Annotations = "web-2", nil
	other.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.3.0.8"}}}
	if _, err := client.DiscoveryV1().EndpointSlices("ns").Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	serving = append(serving, "10.3.0.8:8080/TCP")
	waitFor("the other slice applied", func() bool { return slices.Equal(backends(), serving) })
	if r.src.Errors() != before {
		t.Fatalf("the invalid slice was reported %d more times when the service's backends were derived again", r.src.Errors()-before)
	}

	update(func(es *discoveryv1.EndpointSlice) { es.Annotations[AnnotationWeights] = "10.3.0.6=30" })
	waitFor("the fixed slice applied", func() bool {
		return slices.Equal(backends(), []string{"10.3.0.6:8080/TCP (weight=30)", "10.3.0.7:8080/TCP", "10.3.0.8:8080/TCP"})
	})
}
