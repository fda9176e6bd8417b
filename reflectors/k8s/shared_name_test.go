package k8s

import (
	"testing"
	"unsafe"

	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// Every row of a service (its service row, its frontends, its backends'
// instances) names it with one string, whichever of the Service and its
// slice came first: a name costs its bytes once per service.
func TestRowsShareOneServiceName(t *testing.T) {
	for _, sliceFirst := range []bool{false, true} {
		db := statedb.New()
		w, err := tables.New(db, nil)
		if err != nil {
			t.Fatal(err)
		}
		r := newTestReflector(t, DefaultConfig, w)
		port := int32(8080)
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
			Spec:       corev1.ServiceSpec{ClusterIP: "10.96.0.1", Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}},
		}
		es := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "web-1", Namespace: "ns", Labels: map[string]string{LabelServiceName: "web"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Port: &port}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.1"}}},
		}
		if sliceFirst {
			r.apply([]event{{obj: es}})
			r.apply([]event{{obj: svc}})
		} else {
			r.apply([]event{{obj: svc}, {obj: es}})
		}
		txn := db.ReadTxn()
		name := lb.NewServiceName("ns", "web")
		s, _, ok := w.Services().Get(txn, tables.ServiceByName.Query(name))
		fe, _, feOK := w.Frontends().Get(txn, tables.FrontendByAddress.Query(lb.MustParseL3n4Addr("10.96.0.1:80/TCP")))
		be, _, beOK := w.Backends().Get(txn, tables.BackendByAddress.Query(lb.MustParseL3n4Addr("10.1.0.1:8080/TCP")))
		if !ok || !feOK || !beOK || len(be.Instances) != 1 {
			t.Fatalf("slice first %v: service %v, frontend %v, backend %v", sliceFirst, ok, feOK, be)
		}
		text := func(n lb.ServiceName) *byte { return unsafe.StringData(n.String()) }
		if text(s.Name) != text(fe.Service) || text(s.Name) != text(be.Instances[0].Service) || text(s.Name) != text(s.Params[0].Name) {
			t.Errorf("slice first %v: the rows name the service with different strings", sliceFirst)
		}
	}
}
