package reconciler_test

import (
	"sync"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// slotWrites counts the writes of the arrays under lb_backends and
// lb_rev_nat, entry by entry: a slot filled in two writes counts two.
type slotWrites struct {
	mu sync.Mutex
	n  map[string]int
}

func (w *slotWrites) Fail(mapName, op string) error {
	if op == "update" || op == "batch update" {
		w.mu.Lock()
		w.n[mapName]++
		w.mu.Unlock()
	}
	return nil
}

func (w *slotWrites) take() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.n
	w.n = map[string]int{}
	return n
}

// A fresh agent fills each lb_backends slot in one write: none held an
// ID. Once the IDs have gone around the slots, a slot that held a
// deleted backend takes its next ID in two writes, fields then ID, and
// one still never used in one. lb_rev_nat takes two writes for every
// new ID: a master entry names it before its entry is written.
func TestBackendSlotsAreFilledInOneWriteUntilUsed(t *testing.T) {
	const services, backends = 10, 3
	cfg := smallMapsConfig()
	cfg.LBBackendsMax = 40
	w := &slotWrites{n: map[string]int{}}
	maps, err := bpf.NewMemoryMaps(cfg, w)
	if err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, maps, nil)
	a.start(t)
	defer a.stop(t)
	declare(t, a, 0, services, backends)
	a.waitDone(t, 10*time.Second)
	got := w.take()
	if got["lb_backends"] != services*backends || got["lb_rev_nat"] != 2*services {
		t.Errorf("a fresh agent wrote %d lb_backends and %d lb_rev_nat entries, want %d (one each) and %d (two each)",
			got["lb_backends"], got["lb_rev_nat"], services*backends, 2*services)
	}
	a.write(t, func(txn statedb.WriteTxn) error {
		for i := range services {
			if err := a.w.DeleteService(txn, serviceName(i), lb.SourceK8s); err != nil {
				return err
			}
		}
		return nil
	})
	a.waitDone(t, 10*time.Second)
	w.take()
	// IDs 31..60 take slots 31..39 and 0, never used, and 1..20, which
	// held IDs 1..20.
	declare(t, a, services, services, backends)
	a.waitDone(t, 10*time.Second)
	if got := w.take()["lb_backends"]; got != 10+2*20 {
		t.Errorf("30 backends over 10 never-used and 20 used slots: %d writes, want %d", got, 10+2*20)
	}
}
