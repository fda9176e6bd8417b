package reconciler_test

// Backends: one lb_backends entry per address, shared by every frontend
// that uses it, reference counted.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/internal/smallset"
	"github.com/lbstate/lbstate/lb"
)

// The lb_backends entry of a backend two frontends see in different
// states (a: active, b: terminating) depends only on the tables, not on
// which frontend was reconciled last. (Each update once overwrote the
// entry with its own frontend's view.)
func TestSharedBackendValueIndependentOfHistory(t *testing.T) {
	maps := memoryMaps(t)
	a := newAgent(t, maps, nil)
	a.start(t)
	defer a.stop(t)
	active := be("10.5.0.1:8080/TCP")
	terminating := active
	terminating.State = lb.BackendTerminating
	other := be("10.5.0.9:8080/TCP")
	a.write(t, func(txn statedb.WriteTxn) error {
		if err := upsert(a.w, txn, "a", "10.96.7.1:80/TCP", lb.AlgorithmRandom, false, active); err != nil {
			return err
		}
		return upsert(a.w, txn, "b", "10.96.7.2:80/TCP", lb.AlgorithmRandom, false, terminating)
	})
	a.waitDone(t, 10*time.Second)
	before := dumpText(t, maps)
	// a gains and loses another backend: the tables end as they began.
	a.write(t, func(txn statedb.WriteTxn) error {
		return upsert(a.w, txn, "a", "10.96.7.1:80/TCP", lb.AlgorithmRandom, false, active, other)
	})
	a.waitDone(t, 10*time.Second)
	a.write(t, func(txn statedb.WriteTxn) error {
		return upsert(a.w, txn, "a", "10.96.7.1:80/TCP", lb.AlgorithmRandom, false, active)
	})
	a.waitDone(t, 10*time.Second)
	if after := dumpText(t, maps); after != before {
		t.Fatalf("same tables, different maps:\n--- before\n%s--- after\n%s", before, after)
	}
}

// A frontend that drops some of its backends releases exactly those, for
// a few backends and for more than smallset.Max: lb_backends ends as if
// it had only ever had the ones it kept.
func TestDroppedBackendsReleased(t *testing.T) {
	for _, n := range []int{4, smallset.Max + 8} {
		maps := memoryMaps(t)
		a := newAgent(t, maps, nil)
		a.start(t)
		var all, kept []lb.BackendParams
		for i := range n {
			all = append(all, be(fmt.Sprintf("10.10.0.%d:8080/TCP", i+1)))
			if i%2 == 0 {
				kept = append(kept, all[i])
			}
		}
		a.write(t, func(txn statedb.WriteTxn) error {
			return upsert(a.w, txn, "many", "10.96.12.1:80/TCP", lb.AlgorithmRandom, false, all...)
		})
		a.waitDone(t, 10*time.Second)
		a.write(t, func(txn statedb.WriteTxn) error {
			return upsert(a.w, txn, "many", "10.96.12.1:80/TCP", lb.AlgorithmRandom, false, kept...)
		})
		a.waitDone(t, 10*time.Second)
		var got []string
		maps.Backends.Iterate(func(_ uint32, v bpf.Backend) bool {
			got = append(got, v.L3n4Addr().String())
			return true
		})
		a.stop(t)
		if len(got) != len(kept) {
			t.Fatalf("n=%d: lb_backends holds %d backends, want the %d kept:\n%s", n, len(got), len(kept), strings.Join(got, "\n"))
		}
		for _, b := range kept {
			if !strings.Contains(strings.Join(got, " ")+" ", b.Address.String()+" ") {
				t.Errorf("n=%d: kept backend %s not in lb_backends", n, b.Address)
			}
		}
	}
}
