package reconciler_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reconciler"
)

// The lb_backends entry of a backend ID restore dropped is room: once no
// slot names the ID and its entry goes (checkDropped, on a timer), a
// frontend waiting for that room is offered it then, not at the next
// change of some frontend or the periodic prune, half an hour away.
func TestDroppedBackendIDsEntryGoesToAFrontendWaitingForRoom(t *testing.T) {
	cfg := smallMapsConfig()
	cfg.LBBackendsMax = 4
	raw, err := bpf.NewMemoryMaps(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	x := addr("10.20.0.1:8080/TCP")
	vips := []lb.L3n4Addr{addr("10.96.20.1:80/TCP"), addr("10.96.20.2:80/TCP")}
	// Two IDs of one address (slots 1 and 2), each named by a frontend:
	// restore keeps one and drops the other.
	twoIDsOfOneAddress(t, raw, x, vips, 5, 6)
	maps, failing := failingServices(raw)
	// No retry of statedb's in sight: the frontend waiting for room is to
	// be offered it when it frees.
	defer reconciler.SetRetryMinBackoff(time.Hour)()
	a := newAgent(t, maps, func(c *reconciler.Config) { c.LBRetryMaxBackoff = time.Hour })
	// web-2's three backends need three of lb_backends' four entries;
	// the two IDs of x hold two.
	a.startWithTwoIDs(t, x, vips, func(txn statedb.WriteTxn) error {
		return upsert(a.w, txn, "web-2", "10.96.20.3:80/TCP", lb.AlgorithmRandom, false,
			be("10.20.0.2:8080/TCP"), be("10.20.0.3:8080/TCP"), be("10.20.0.4:8080/TCP"))
	})
	// Both slots, rewritten, name x's ID restore kept (which of the two
	// it keeps is not this test's business): the other's entry can go.
	failing.armed.Store(false)
	a.write(t, func(txn statedb.WriteTxn) error {
		for i, vip := range vips {
			if err := upsert(a.w, txn, fmt.Sprintf("web-%d", i), vip.String(), lb.AlgorithmRandom, true, be(x.String())); err != nil {
				return err
			}
		}
		return nil
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		n := 0
		raw.Backends.Iterate(func(uint32, bpf.Backend) bool { n++; return true })
		if _, failed := a.statuses(); n == 4 && len(failed) == 0 {
			web2 := addr("10.96.20.3:80/TCP")
			if m, ok, _ := raw.Services.Lookup(bpf.NewServiceKey(web2, 0)); ok {
				if _, ok, _ := bpf.SlotBackend(raw.Services, web2, m, 3); ok {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			done, failed := a.statuses()
			t.Fatalf("web-2 never took the room the dropped ID's entry left (done %v, failed %v):\n%s", done, failed, dumpText(t, raw))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Each prune that leaves a slot naming a backend ID restore dropped asks
// for a look at it later (checkDropped), which asks again while a slot
// names it: the looks are one chain, however many prunes ask, not one
// more chain per prune (every periodic prune would add one, each looking
// once a minute, for as long as the slot is not rewritten).
func TestDroppedBackendIDIsLookedAtByOneTimerHoweverManyPrunes(t *testing.T) {
	const every = 50 * time.Millisecond
	defer reconciler.SetPruneRetry(every, every)()
	var checks atomic.Int32
	defer reconciler.OnDroppedCheck(func() { checks.Add(1) })()
	raw := memoryMaps(t)
	x := addr("10.20.0.1:8080/TCP")
	vips := []lb.L3n4Addr{addr("10.96.20.1:80/TCP"), addr("10.96.20.2:80/TCP")}
	twoIDsOfOneAddress(t, raw, x, vips, 5, 9)
	maps, _ := failingServices(raw) // the slot naming the dropped ID stays
	a := newAgent(t, maps, nil)
	a.startWithTwoIDs(t, x, vips, nil)
	// Four more prunes, each leaving the slot as it was.
	for n := 2; n <= 5; n++ {
		a.rec.Prune()
		want := fmt.Sprintf("lbstate_reconciler_prune_duration_seconds_count %d\n", n)
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(a.scrape(t), want); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("prune %d did not run in 10 s", n)
			}
		}
	}
	for deadline := time.Now().Add(10 * time.Second); checks.Load() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the dropped backend ID was never looked at")
		}
	}
	// One timer looks at most once per wait: over a second, a measure,
	// not a wait for something, at most 21 times.
	start := checks.Load()
	window := time.Second
	time.Sleep(window)
	if got, most := checks.Load()-start, int32(window/every)+1; got > most {
		t.Errorf("%d looks at the dropped backend ID in %s, at most %d from one timer", got, window, most)
	}
}
