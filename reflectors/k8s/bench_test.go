package k8s

import (
	"fmt"
	"syscall"
	"testing"
	"time"

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

// benchEvents returns n Services, each followed by its EndpointSlice
// (with backends endpoints, named as the EndpointSlice controller names
// them), as an informer hands them over, and their deletions in the order
// lbbench deletes them: each slice, then its Service.
func benchEvents(n, backends int) (inserts, deletes []event) {
	inserts = make([]event, 0, 2*n)
	for i := range n {
		name := fmt.Sprintf("svc-%d", i)
		port := int32(8080)
		inserts = append(inserts,
			event{obj: &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "bench"},
				Spec: corev1.ServiceSpec{
					ClusterIP: fmt.Sprintf("10.%d.%d.%d", 96+i>>16, (i>>8)&255, i&255),
					Ports:     []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}},
				},
			}},
			event{obj: &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Name: name + "-x7k2q", Namespace: "bench", Labels: map[string]string{LabelServiceName: name}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports:       []discoveryv1.EndpointPort{{Port: &port}},
				Endpoints:   endpoints(i, backends),
			}})
	}
	deletes = make([]event, 0, 2*n)
	for i := 0; i < len(inserts); i += 2 {
		deletes = append(deletes, event{obj: inserts[i+1].obj, deleted: true}, event{obj: inserts[i].obj, deleted: true})
	}
	return inserts, deletes
}

// benchPhases runs each phase's events through step in batches of 500,
// timing only the phase named by the sub-benchmark, so that ns/op is per
// service inserted or deleted. cpu-ns/op is the process's CPU time in
// the timed phase (garbage collection included), per service: on a
// machine busy with other work it moves less than ns/op.
func benchPhases(b *testing.B, n int, inserts, deletes []event, step func([]event), after func(*testing.B)) {
	for _, phase := range []string{"insert", "delete"} {
		b.Run(phase, func(b *testing.B) {
			b.ReportAllocs()
			var cpu time.Duration
			for done := 0; done < b.N; {
				m := min(n, b.N-done)
				for pass, evs := range [][]event{inserts, deletes} {
					timed := pass == 0 && phase == "insert" || pass == 1 && phase == "delete"
					if !timed {
						b.StopTimer()
					}
					start := cpuTime()
					for i := 0; i < 2*m; i += 500 {
						step(evs[i:min(i+500, 2*m)])
					}
					if timed {
						cpu += cpuTime() - start
					} else {
						b.StartTimer()
					}
				}
				done += m
			}
			b.StopTimer()
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			if after != nil {
				after(b)
			}
		})
	}
}

// cpuTime is the CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReflectorApply measures the reflector's own path, without a
// reconciler: a Service and its EndpointSlice (1 or 10 endpoints) converted and
// declared through the Writer, in batches of 500, then deleted. ns/op is
// per service, for inserting and for deleting.
func BenchmarkReflectorApply(b *testing.B) {
	for _, k := range []int{1, 10} {
		b.Run(fmt.Sprintf("backends=%d", k), func(b *testing.B) {
			db := statedb.New()
			w, err := tables.New(db, nil)
			if err != nil {
				b.Fatal(err)
			}
			r := newTestReflector(b, DefaultConfig, w)
			const n = 50000
			inserts, deletes := benchEvents(n, k)
			benchPhases(b, n, inserts, deletes, r.apply, func(b *testing.B) {
				if got := w.Frontends().NumObjects(db.ReadTxn()); got != 0 {
					b.Fatalf("%d frontends left", got)
				}
			})
		})
	}
}

// BenchmarkReflectorPrepare measures the reflector's first stage alone:
// keeping the objects and converting them into Writer calls (which are
// dropped), per service inserted and deleted, in batches of 500.
func BenchmarkReflectorPrepare(b *testing.B) {
	for _, k := range []int{1, 10} {
		b.Run(fmt.Sprintf("backends=%d", k), func(b *testing.B) {
			w, err := tables.New(statedb.New(), nil)
			if err != nil {
				b.Fatal(err)
			}
			r := newTestReflector(b, DefaultConfig, w)
			const n = 50000
			inserts, deletes := benchEvents(n, k)
			benchPhases(b, n, inserts, deletes, func(evs []event) { r.prepare(evs) }, func(b *testing.B) {
				if len(r.services) != 0 || len(r.slices) != 0 {
					b.Fatalf("%d services, %d slices left", len(r.services), len(r.slices))
				}
			})
		})
	}
}
