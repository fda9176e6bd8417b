package reconciler_test

// Restart: what a restored ID is matched by.

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// Frontends that share an address and port (TCP and UDP twins, and the
// two scopes of one protocol) each get their own rev-NAT ID back when
// only lb_rev_nat remembers them (lb_services was recreated, or lost its
// masters), whatever order the sources declare them in again. (Restore
// once matched lb_rev_nat entries by address and port alone, and handed
// the lowest ID to whichever twin came first: the twins swapped IDs, and
// with them their affinity entries and conntrack's reply rewriting.)
func TestRestoreGivesEachTwinItsOwnRevNatID(t *testing.T) {
	twins := []string{"10.96.14.1:53/UDP", "10.96.14.1:53/TCP/i", "10.96.14.1:53/TCP"}
	declareTwin := func(t *testing.T, a *agent, i int) {
		n := lb.NewServiceName("test", fmt.Sprintf("twin-%d", i))
		a.write(t, func(txn statedb.WriteTxn) error {
			if err := a.w.UpsertService(txn, lb.ServiceParams{Name: n, Source: lb.SourceK8s,
				Frontends: []lb.FrontendParams{{Address: addr(twins[i]), Type: lb.SVCTypeNodePort}}}); err != nil {
				return err
			}
			return a.w.SetBackends(txn, n, lb.SourceK8s, be("10.14.0.1:53/"+addr(twins[i]).Protocol().String()))
		})
		a.waitDone(t, 10*time.Second)
	}
	onBothMapKinds(t, func(t *testing.T, maps1 *bpf.Maps, reopen func() *bpf.Maps) {
		a1 := newAgent(t, maps1, nil)
		a1.start(t)
		for i := range twins { // one at a time: IDs in this order
			declareTwin(t, a1, i)
		}
		ids := a1.frontendIDs()
		a1.stop(t)
		// lb_services forgets them; lb_rev_nat remembers.
		var keys []bpf.ServiceKey
		mustDo(t, maps1.Services.Iterate(func(k bpf.ServiceKey, _ bpf.ServiceValue) bool { keys = append(keys, k); return true }))
		mustDo(t, maps1.Services.BatchDelete(keys))
		if maps1.Kind == "kernel" {
			maps1.Close()
		}

		maps2 := reopen()
		a2, synced := startUnsynced(t, maps2)
		for i := range twins { // the other way round
			declareTwin(t, a2, len(twins)-1-i)
		}
		synced()
		a2.waitDone(t, 10*time.Second)
		if got := a2.frontendIDs(); !maps.Equal(got, ids) {
			t.Errorf("the twins' IDs changed across the restart:\n before %v\n after  %v", ids, got)
		}
	})
}

// An older agent wrote lb_rev_nat without the frontend's protocol and
// scope (zero there): after an upgrade that finds only lb_rev_nat (its
// lb_services recreated), a TCP frontend still gets its ID back, and its
// entry is rewritten with what it lacked.
func TestRestoreKeepsTheIDOfAnOlderAgentsRevNatEntry(t *testing.T) {
	fe := "10.96.15.1:80/TCP"
	n := lb.NewServiceName("test", "older")
	declare := func(t *testing.T, a *agent) {
		a.write(t, func(txn statedb.WriteTxn) error {
			if err := a.w.UpsertService(txn, lb.ServiceParams{Name: n, Source: lb.SourceK8s,
				Frontends: []lb.FrontendParams{{Address: addr(fe), Type: lb.SVCTypeClusterIP}}}); err != nil {
				return err
			}
			return a.w.SetBackends(txn, n, lb.SourceK8s, be("10.15.0.1:80/TCP"))
		})
		a.waitDone(t, 10*time.Second)
	}
	onBothMapKinds(t, func(t *testing.T, maps1 *bpf.Maps, reopen func() *bpf.Maps) {
		a1 := newAgent(t, maps1, nil)
		a1.start(t)
		declare(t, a1)
		ids := a1.frontendIDs()
		a1.stop(t)
		// As an older agent left them: lb_rev_nat without protocol and
		// scope, and lb_services recreated.
		var entries []bpf.RevNatValue
		mustDo(t, maps1.RevNat.Iterate(func(id uint32, v bpf.RevNatValue) bool { v.ID = id; entries = append(entries, v); return true }))
		for _, v := range entries {
			id := v.ID
			v.ID, v.Proto, v.Scope = 0, 0, 0
			mustDo(t, maps1.RevNat.Update(id, v))
		}
		var keys []bpf.ServiceKey
		mustDo(t, maps1.Services.Iterate(func(k bpf.ServiceKey, _ bpf.ServiceValue) bool { keys = append(keys, k); return true }))
		mustDo(t, maps1.Services.BatchDelete(keys))
		if maps1.Kind == "kernel" {
			maps1.Close()
		}

		maps2 := reopen()
		a2, synced := startUnsynced(t, maps2)
		declare(t, a2)
		synced()
		a2.waitDone(t, 10*time.Second)
		if got := a2.frontendIDs(); !maps.Equal(got, ids) {
			t.Errorf("the frontend's ID changed across the upgrade: before %v, after %v", ids, got)
		}
		want := bpf.NewRevNatValue(addr(fe))
		mustDo(t, maps2.RevNat.Iterate(func(id uint32, v bpf.RevNatValue) bool {
			if v.ID = 0; v != want {
				t.Errorf("lb_rev_nat %d is %+v, want %+v (rewritten with protocol and scope)", id, v, want)
			}
			return true
		}))
	})
}
