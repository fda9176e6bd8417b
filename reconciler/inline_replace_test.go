package reconciler_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// inlineStep is one declaration of a frontend's backends: active ones,
// then terminating ones (standby slots), numbered from base in the
// backends' third address byte so that a new base replaces them all.
type inlineStep struct{ base, active, terminating int }

// A frontend whose inline slots change backend (each replaced by
// another, whose old lb_backends entry goes), and whose standby slots
// straddle the inline line (active ones inside, terminating ones across
// it), keeps the write order at every write: no master or slot names a
// backend not in lb_backends, no backend goes while a master's inline
// slots name it, no master counts a slot entry not there.
func TestInlineSlotsReplacedAndStraddlingStandbyKeepWriteOrder(t *testing.T) {
	onOrderCheckedAgent(t, func(t *testing.T, a *agent, maps *bpf.Maps, settle func(string)) {
		name, fe := lb.NewServiceName("test", "replace"), addr("10.96.42.1:80/TCP")
		k := bpf.InlineSlots
		for _, step := range []inlineStep{
			{0, 10, 0}, {1, 10, 0}, // every inline slot replaced
			{2, k - 2, 4}, {3, k - 2, 4}, // standby straddles, then replaced
			{3, k + 2, 0}, {4, 3, k}, {5, k, 1}, {5, 1, 0},
		} {
			a.write(t, func(txn statedb.WriteTxn) error {
				if err := a.w.UpsertService(txn, lb.ServiceParams{Name: name, Source: lb.SourceK8s, Algorithm: lb.AlgorithmRandom,
					Frontends: []lb.FrontendParams{{Address: fe, Type: lb.SVCTypeClusterIP}}}); err != nil {
					return err
				}
				var bes []lb.BackendParams
				for i := range step.active + step.terminating {
					p := lb.BackendParams{Address: lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{10, 42, byte(step.base), byte(i)}), 8080, lb.ScopeExternal), Weight: 1}
					if i >= step.active {
						p.State = lb.BackendTerminating
					}
					bes = append(bes, p)
				}
				return a.w.SetBackends(txn, name, lb.SourceK8s, bes...)
			})
			settle(fmt.Sprintf("%+v", step))
			n := step.active + step.terminating
			entries, slots := serviceEntries(t, maps, fe)
			if want := 1 + max(0, n-k); entries != want || len(slots) != n {
				t.Errorf("%+v: %d lb_services entries and %d slots, want %d and %d\n%s", step, entries, len(slots), want, n, dumpText(t, maps))
			}
			for s, id := range slots {
				if _, ok, err := maps.Backends.Lookup(id); err != nil || !ok {
					t.Errorf("%+v: slot %d names backend %d, not in lb_backends (%v)", step, s+1, id, err)
				}
			}
		}
	})
}

// A master rewritten for another reason than its slots (session affinity
// on and off, the algorithm) keeps the backend IDs of its inline slots:
// every master write carries them, none is built from the master's
// fields alone.
func TestMasterRewrittenForAffinityKeepsItsInlineSlots(t *testing.T) {
	onOrderCheckedAgent(t, func(t *testing.T, a *agent, maps *bpf.Maps, settle func(string)) {
		vip := "10.96.42.2:80/TCP"
		var bes []lb.BackendParams
		for i := range bpf.InlineSlots + 2 {
			bes = append(bes, lb.BackendParams{Address: lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{10, 42, 9, byte(i)}), 8080, lb.ScopeExternal), Weight: 1})
		}
		var first []uint32
		for step, affinity := range []bool{false, true, false, true} {
			a.write(t, func(txn statedb.WriteTxn) error {
				return upsert(a.w, txn, "affinity", vip, lb.AlgorithmRandom, affinity, bes...)
			})
			settle(fmt.Sprintf("step %d", step))
			master, ok, err := maps.Services.Lookup(bpf.NewServiceKey(addr(vip), 0))
			if err != nil || !ok || (master.AffinityTimeout > 0) != affinity {
				t.Fatalf("step %d: master %+v (found %v, %v), want affinity %v", step, master, ok, err, affinity)
			}
			_, slots := serviceEntries(t, maps, addr(vip))
			if first == nil {
				first = slots
			}
			if fmt.Sprint(slots) != fmt.Sprint(first) || len(slots) != len(bes) {
				t.Errorf("step %d (affinity %v): slots %v, want %v", step, affinity, slots, first)
			}
		}
	})
}
