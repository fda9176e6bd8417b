package k8s

import (
	"fmt"
	"testing"

	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbstate/lbstate/tables"
)

// endpoints returns service i's endpoints, one address each.
func endpoints(i, n int) []discoveryv1.Endpoint {
	out := make([]discoveryv1.Endpoint, n)
	for j := range out {
		k := i*n + j
		out[j].Addresses = []string{fmt.Sprintf("11.%d.%d.%d", k>>16, (k>>8)&255, k&255)}
	}
	return out
}

// BenchmarkReflectorApply measures the reflector's own path, without a
// reconciler: a Service and its EndpointSlice (1 or 10 endpoints) converted and
// declared through the Writer, in batches of 500, then deleted. ns/op is
// per service, for inserting and for deleting.
func BenchmarkReflectorApply(b *testing.B) {
	for _, k := range []int{1, 10} {
		b.Run(fmt.Sprintf("backends=%d", k), func(b *testing.B) { benchReflectorApply(b, k) })
	}
}

func benchReflectorApply(b *testing.B, backends int) {
	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		b.Fatal(err)
	}
	r := newTestReflector(b, DefaultConfig, w)
	const n = 50000
	events := make([]event, 0, 2*n)
	for i := range n {
		name := fmt.Sprintf("svc-%d", i)
		port := int32(8080)
		events = append(events,
			event{obj: &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "bench"},
				Spec: corev1.ServiceSpec{
					ClusterIP: fmt.Sprintf("10.%d.%d.%d", 96+i>>16, (i>>8)&255, i&255),
					Ports:     []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}},
				},
			}},
			event{obj: &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: "bench", Labels: map[string]string{LabelServiceName: name}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports:       []discoveryv1.EndpointPort{{Port: &port}},
				Endpoints:   endpoints(i, backends),
			}})
	}
	deletes := make([]event, len(events))
	for i, ev := range events {
		deletes[i] = event{obj: ev.obj, deleted: true}
	}
	for _, phase := range []string{"insert", "delete"} {
		b.Run(phase, func(b *testing.B) {
			b.ReportAllocs()
			for done := 0; done < b.N; {
				m := min(n, b.N-done)
				// Time only this phase's events.
				for pass, evs := range [][]event{events, deletes} {
					timed := pass == 0 && phase == "insert" || pass == 1 && phase == "delete"
					if !timed {
						b.StopTimer()
					}
					for i := 0; i < 2*m; i += 500 {
						r.apply(evs[i:min(i+500, 2*m)])
					}
					if !timed {
						b.StartTimer()
					}
				}
				done += m
			}
			b.StopTimer()
			if got := w.Frontends().NumObjects(db.ReadTxn()); got != 0 {
				b.Fatalf("%d frontends left", got)
			}
		})
	}
}
