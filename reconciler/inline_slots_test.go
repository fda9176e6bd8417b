package reconciler_test

// A master entry holds the first bpf.InlineSlots slots of its frontend;
// only slots after them have entries of their own. These tests cross
// that line: growth and shrink around it keep the write order, a
// frontend takes 1 + max(0, slots - InlineSlots) entries, and a restart
// reads the inline slots back so that it writes nothing.

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// inlineSizes are the backend counts at the line: all inline, one entry
// past them, and more than twice as many.
var inlineSizes = []int{bpf.InlineSlots, bpf.InlineSlots + 1, 2*bpf.InlineSlots + 3}

// declareBackends gives service name (frontend fe) n backends of equal
// weight, each its own slot.
func declareBackends(t *testing.T, a *agent, name lb.ServiceName, fe lb.L3n4Addr, n int) {
	t.Helper()
	a.write(t, func(txn statedb.WriteTxn) error {
		if err := a.w.UpsertService(txn, lb.ServiceParams{Name: name, Source: lb.SourceK8s, Algorithm: lb.AlgorithmRandom,
			Frontends: []lb.FrontendParams{{Address: fe, Type: lb.SVCTypeClusterIP}}}); err != nil {
			return err
		}
		bes := make([]lb.BackendParams, n)
		for i := range bes {
			bes[i] = lb.BackendParams{Address: lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{10, 40, byte(fe.Port()), byte(i)}), 8080, lb.ScopeExternal), Weight: 1}
		}
		return a.w.SetBackends(txn, name, lb.SourceK8s, bes...)
	})
}

// serviceEntries counts the lb_services entries of frontend fe, and
// returns the backend IDs of its slots as the datapath reads them.
func serviceEntries(t *testing.T, maps *bpf.Maps, fe lb.L3n4Addr) (entries int, slots []uint32) {
	t.Helper()
	var master bpf.ServiceValue
	err := maps.Services.Iterate(func(k bpf.ServiceKey, v bpf.ServiceValue) bool {
		if k.L3n4Addr() == fe {
			entries++
			if k.Slot == 0 {
				master = v
			}
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	for s := 1; s <= master.Slots(); s++ {
		id, ok, err := bpf.SlotBackend(maps.Services, fe, master, s)
		if err != nil || !ok {
			t.Fatalf("slot %d of %s: missing (%v)", s, fe, err)
		}
		slots = append(slots, id)
	}
	return entries, slots
}

// onOrderCheckedAgent runs f on both kinds of maps with a started agent
// whose every map write is checked against the write order; settle waits
// until the agent is done and fails, naming what, if a write broke it.
func onOrderCheckedAgent(t *testing.T, f func(t *testing.T, a *agent, maps *bpf.Maps, settle func(what string))) {
	onBothMapKinds(t, func(t *testing.T, maps *bpf.Maps, _ func() *bpf.Maps) {
		written, order := checkWriteOrder(maps)
		a := newAgent(t, written, nil)
		a.start(t)
		defer a.stop(t)
		f(t, a, maps, func(what string) {
			t.Helper()
			a.waitDone(t, 30*time.Second)
			if v := order.violations(); len(v) > 0 {
				t.Fatalf("%s: the writes broke the write order: %v\n%s", what, v, dumpText(t, maps))
			}
		})
	})
}

// A frontend grown from InlineSlots backends to one more, back, to
// 2*InlineSlots+3 and back keeps the write order at every write (the
// slot entry past the inline ones before the master counts it; the
// master before that entry goes), takes 1 + max(0, n - InlineSlots)
// entries, and names each of its backends in one slot.
func TestGrowthAcrossTheInlineSlotsKeepsWriteOrder(t *testing.T) {
	onOrderCheckedAgent(t, func(t *testing.T, a *agent, maps *bpf.Maps, settle func(string)) {
		name, fe := lb.NewServiceName("test", "inline"), addr("10.96.40.1:80/TCP")
		k := bpf.InlineSlots
		for _, n := range []int{k, k + 1, k, 2*k + 3, k + 1, 1, 2*k + 3, 0, k} {
			declareBackends(t, a, name, fe, n)
			settle(fmt.Sprintf("%d backends", n))
			entries, slots := serviceEntries(t, maps, fe)
			if want := 1 + max(0, n-k); entries != want {
				t.Errorf("%d backends: %d lb_services entries, want %d\n%s", n, entries, want, dumpText(t, maps))
			}
			seen := map[uint32]bool{}
			for _, id := range slots {
				seen[id] = true
			}
			if len(slots) != n || len(seen) != n || seen[0] {
				t.Errorf("%d backends: slots %v, want %d distinct backends", n, slots, n)
			}
		}
	})
}

// A restart over services with InlineSlots, InlineSlots+1 and
// 2*InlineSlots+3 backends reads their slots back from masters and slot
// entries alike: it writes no entry of any map and keeps every ID.
func TestRestartAtTheInlineSizesWritesNothing(t *testing.T) {
	onBothMapKinds(t, func(t *testing.T, maps *bpf.Maps, reopen func() *bpf.Maps) {
		declare := func(a *agent) {
			for i, n := range inlineSizes {
				declareBackends(t, a, lb.NewServiceName("test", fmt.Sprintf("inline-%d", n)),
					lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{10, 96, 41, byte(i)}), uint16(80+i), lb.ScopeExternal), n)
			}
		}
		restartWritesNothing(t, maps, reopen, declare, func(_ *agent, before string) {
			if want := fmt.Sprintf("slot=%d ", 2*bpf.InlineSlots+3); !strings.Contains(before, want) {
				t.Fatalf("no %q in the maps:\n%s", want, before)
			}
		})
	})
}
