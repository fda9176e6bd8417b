package reconciler_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// A restart over masters that a crash left uneven at the inline line
// settles every frontend whole, with the room counting what the maps
// hold: a master counting 20 slots whose entries 17..20 are missing, a
// master whose inline slot 3 is zero, a master whose inline slot names
// a backend nobody has, and entries of inline slots beside a master (the
// layout before inline slots) which the prune deletes.
func TestRestartOverUnevenInlineSlotsSettlesEveryFrontendWhole(t *testing.T) {
	onBothMapKinds(t, func(t *testing.T, maps *bpf.Maps, reopen func() *bpf.Maps) {
		k := bpf.InlineSlots
		sizes := []int{k + 4, 5, 3, k + 1}
		fes := make([]lb.L3n4Addr, len(sizes))
		declare := func(a *agent) {
			for i, n := range sizes {
				fes[i] = lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{10, 96, 43, byte(i)}), 80, lb.ScopeExternal)
				declareBackends(t, a, lb.NewServiceName("test", fmt.Sprintf("uneven-%d", i)), fes[i], n)
			}
		}
		a1 := newAgent(t, maps, nil)
		a1.start(t)
		declare(a1)
		a1.waitDone(t, 30*time.Second)
		a1.stop(t)

		master := func(fe lb.L3n4Addr) bpf.ServiceValue {
			v, ok, err := maps.Services.Lookup(bpf.NewServiceKey(fe, 0))
			if err != nil || !ok {
				t.Fatalf("no master of %s (%v)", fe, err)
			}
			return v
		}
		for s := k + 1; s <= k+4; s++ {
			mustDo(t, maps.Services.Delete(bpf.NewServiceKey(fes[0], uint16(s))))
		}
		v := master(fes[1])
		v.Backends[2] = 0
		mustDo(t, maps.Services.Update(bpf.NewServiceKey(fes[1], 0), v))
		v = master(fes[2])
		v.Backends[1] = 60000
		mustDo(t, maps.Services.Update(bpf.NewServiceKey(fes[2], 0), v))
		v = master(fes[3])
		for s := 1; s <= 2; s++ {
			mustDo(t, maps.Services.Update(bpf.NewServiceKey(fes[3], uint16(s)), bpf.ServiceValue{BackendID: v.Backends[s-1], RevNatID: v.RevNatID}))
		}

		if maps.Kind == "kernel" {
			maps.Close()
		}
		maps2 := reopen()
		a2, synced := startUnsynced(t, maps2)
		defer a2.stop(t)
		declare(a2)
		synced()
		a2.waitDone(t, 30*time.Second)
		a2.waitPruned(t, 30*time.Second)
		a2.waitSettled(t, maps2, 10*time.Second)
		for i, n := range sizes {
			entries, slots := serviceEntries(t, maps2, fes[i])
			if want := 1 + max(0, n-k); entries != want || len(slots) != n {
				t.Errorf("%s: %d entries and %d slots, want %d and %d\n%s", fes[i], entries, len(slots), want, n, dumpText(t, maps2))
			}
			seen := map[uint32]bool{}
			for s, id := range slots {
				seen[id] = true
				if _, ok, err := maps2.Backends.Lookup(id); err != nil || !ok {
					t.Errorf("%s slot %d: backend %d not in lb_backends (%v)\n%s", fes[i], s+1, id, err, dumpText(t, maps2))
				}
			}
			if len(seen) != n {
				t.Errorf("%s: slots %v, want %d distinct backends", fes[i], slots, n)
			}
		}
		checkAllCounted(t, a2, maps2)
	})
}
