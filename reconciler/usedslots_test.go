package reconciler_test

import (
	"sync"
	"testing"
	"time"

	"github.com/lbstate/lbstate/bpf"
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

// A fresh agent fills each lb_backends and lb_rev_nat slot in one write:
// none held an ID. A restarted agent whose lb_rev_nat was recreated
// empty, while lb_services kept its master entries' IDs (which flows
// carry), writes each kept ID's entry in two, fields then ID: restore
// marks the slots of the IDs it found as used. A frontend new after the
// restart, with an ID never handed out, takes one write again.
func TestRestoredIDsSlotsAreFilledInTwoWritesNewOnesInOne(t *testing.T) {
	const services, backends = 10, 3
	w1 := &slotWrites{n: map[string]int{}}
	maps1, err := bpf.NewMemoryMaps(smallMapsConfig(), w1)
	if err != nil {
		t.Fatal(err)
	}
	a1 := newAgent(t, maps1, nil)
	a1.start(t)
	declare(t, a1, 0, services, backends)
	a1.waitDone(t, 10*time.Second)
	before := a1.frontendIDs()
	a1.stop(t)
	got := w1.take()
	if got["lb_rev_nat"] != services || got["lb_backends"] != services*backends {
		t.Errorf("a fresh agent wrote %d lb_rev_nat and %d lb_backends entries, want %d and %d: one each",
			got["lb_rev_nat"], got["lb_backends"], services, services*backends)
	}

	// lb_rev_nat recreated empty, every other map kept.
	w2 := &slotWrites{n: map[string]int{}}
	maps2, err := bpf.NewMemoryMaps(smallMapsConfig(), w2)
	if err != nil {
		t.Fatal(err)
	}
	revNat := maps2.RevNat
	*maps2 = *maps1
	maps2.RevNat = revNat
	a2, synced := startUnsynced(t, maps2)
	declare(t, a2, 0, services, backends)
	synced()
	a2.waitDone(t, 10*time.Second)
	for addr, id := range a2.frontendIDs() {
		if before[addr] != id {
			t.Fatalf("%s: ID %d became %d", addr, before[addr], id)
		}
	}
	if got := w2.take()["lb_rev_nat"]; got != 2*services {
		t.Errorf("the restarted agent wrote %d lb_rev_nat entries for %d restored IDs, want %d: fields, then ID", got, services, 2*services)
	}
	if got := w1.take()["lb_backends"]; got != 0 {
		t.Errorf("the restarted agent wrote %d lb_backends entries, none of which changed", got)
	}
	declare(t, a2, services, 1, backends)
	a2.waitDone(t, 10*time.Second)
	if got := w2.take()["lb_rev_nat"]; got != 1 {
		t.Errorf("a frontend new after the restart: %d lb_rev_nat writes, want 1", got)
	}
}
