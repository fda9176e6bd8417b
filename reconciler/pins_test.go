package reconciler_test

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// A pin holds only while its backend is in one of the frontend's new-flow
// slots, so when a backend leaves them (here: weight 0) the reconciler
// deletes the pins to it, and only those: pins to backends whose share
// changed but which still take new flows stay, and so do another
// frontend's pins to the same backend.
func TestAffinityClearedForBackendsLeavingTheNewFlowSlots(t *testing.T) {
	maps, err := bpf.NewMemoryMaps(smallMapsConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, maps, nil)
	a.start(t)
	defer a.stop(t)
	web, other := lb.NewServiceName("default", "web"), lb.NewServiceName("default", "other")
	b1, b2, b3 := addr("10.0.0.1:80/TCP"), addr("10.0.0.2:80/TCP"), addr("10.0.0.3:80/TCP")
	backends := func(w1, w2 uint16) []lb.BackendParams {
		return []lb.BackendParams{{Address: b1, Weight: w1}, {Address: b2, Weight: w2}, {Address: b3, Weight: 100}}
	}
	a.write(t, func(txn statedb.WriteTxn) error {
		for _, s := range []struct {
			name lb.ServiceName
			vip  string
		}{{web, "10.96.0.1:80/TCP"}, {other, "10.96.0.2:80/TCP"}} {
			if err := a.w.UpsertService(txn, lb.ServiceParams{Name: s.name, Source: lb.SourceK8s, SessionAffinity: true,
				Frontends: []lb.FrontendParams{{Address: addr(s.vip), Type: lb.SVCTypeClusterIP}}}); err != nil {
				return err
			}
			if err := a.w.SetBackends(txn, s.name, lb.SourceK8s, backends(100, 100)...); err != nil {
				return err
			}
		}
		return nil
	})
	a.waitDone(t, 10*time.Second)
	idOf := func(vip string) uint32 {
		fe, _, _ := a.frontends.Get(a.db.ReadTxn(), tables.FrontendByAddress.Query(addr(vip)))
		return fe.ID
	}
	ids := map[lb.L3n4Addr]uint32{}
	maps.Backends.Iterate(func(id uint32, v bpf.Backend) bool { ids[v.L3n4Addr()] = id; return true })
	pin := func(client string, vip string, to lb.L3n4Addr) bpf.AffinityKey {
		k := bpf.AffinityKey{Client: netip.MustParseAddr(client).As16(), RevNatID: idOf(vip)}
		if err := maps.Affinity.Update(k, bpf.AffinityValue{BackendID: ids[to]}); err != nil {
			t.Fatal(err)
		}
		return k
	}
	toB1, toB2, toB3 := pin("192.0.2.1", "10.96.0.1:80/TCP", b1), pin("192.0.2.2", "10.96.0.1:80/TCP", b2), pin("192.0.2.3", "10.96.0.1:80/TCP", b3)
	otherToB1 := pin("192.0.2.1", "10.96.0.2:80/TCP", b1)

	a.write(t, func(txn statedb.WriteTxn) error { return a.w.SetBackends(txn, web, lb.SourceK8s, backends(0, 300)...) })
	a.waitDone(t, 10*time.Second)
	if _, ok, _ := maps.Affinity.Lookup(toB1); ok {
		t.Error("the client pinned to the backend now at weight 0 is still pinned")
	}
	for what, k := range map[string]bpf.AffinityKey{"a backend whose share grew": toB2, "an unchanged backend": toB3, "the other frontend": otherToB1} {
		if _, ok, _ := maps.Affinity.Lookup(k); !ok {
			t.Errorf("the pin to %s is gone", what)
		}
	}
}

// repinning is an lb_affinity map that runs repin once, at the first
// deletion of key, before it: the datapath pinning a client again, whose
// pin the reconciler's walk found void.
type repinning struct {
	bpf.Map[bpf.AffinityKey, bpf.AffinityValue]
	key   bpf.AffinityKey
	repin func()
}

func (m *repinning) before(ks ...bpf.AffinityKey) {
	if m.repin != nil && slices.Contains(ks, m.key) {
		m.repin()
		m.repin = nil
	}
}

func (m *repinning) Delete(k bpf.AffinityKey) error {
	m.before(k)
	return m.Map.Delete(k)
}

func (m *repinning) BatchDelete(ks []bpf.AffinityKey) error {
	m.before(ks...)
	return m.Map.BatchDelete(ks)
}

func (m *repinning) LookupAndDelete(k bpf.AffinityKey) (bpf.AffinityValue, bool, error) {
	m.before(k)
	return m.Map.(interface {
		LookupAndDelete(bpf.AffinityKey) (bpf.AffinityValue, bool, error)
	}).LookupAndDelete(k)
}

// A client whose pin went void when its backend left the new-flow slots,
// and whom the datapath pinned again (its next flow) between the
// reconciler's walk of the pins and its deletion of the void ones, keeps
// its new pin: the reconciler deleted every pin its walk found, in one
// batch, and the client's next flow was balanced again, to a backend
// other than its first flow's at random.
func TestAffinityPinMadeAgainDuringTheClearingStays(t *testing.T) {
	maps, err := bpf.NewMemoryMaps(smallMapsConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	pins := &repinning{Map: maps.Affinity}
	maps.Affinity = pins
	a := newAgent(t, maps, nil)
	a.start(t)
	defer a.stop(t)
	web := lb.NewServiceName("default", "web")
	b1, b2 := addr("10.0.0.1:80/TCP"), addr("10.0.0.2:80/TCP")
	backends := func(w1 uint16) []lb.BackendParams {
		return []lb.BackendParams{{Address: b1, Weight: w1}, {Address: b2, Weight: 100}}
	}
	a.write(t, func(txn statedb.WriteTxn) error {
		if err := a.w.UpsertService(txn, lb.ServiceParams{Name: web, Source: lb.SourceK8s, SessionAffinity: true,
			Frontends: []lb.FrontendParams{{Address: addr("10.96.0.1:80/TCP"), Type: lb.SVCTypeClusterIP}}}); err != nil {
			return err
		}
		return a.w.SetBackends(txn, web, lb.SourceK8s, backends(100)...)
	})
	a.waitDone(t, 10*time.Second)
	fe, _, _ := a.frontends.Get(a.db.ReadTxn(), tables.FrontendByAddress.Query(addr("10.96.0.1:80/TCP")))
	ids := map[lb.L3n4Addr]uint32{}
	maps.Backends.Iterate(func(id uint32, v bpf.Backend) bool { ids[v.L3n4Addr()] = id; return true })
	client := bpf.AffinityKey{Client: netip.MustParseAddr("192.0.2.1").As16(), RevNatID: fe.ID}
	if err := maps.Affinity.Update(client, bpf.AffinityValue{BackendID: ids[b1]}); err != nil {
		t.Fatal(err)
	}
	again := bpf.AffinityValue{BackendID: ids[b2], LastUsed: bpf.MonotonicSeconds()}
	pins.key = client
	pins.repin = func() {
		if err := pins.Map.Update(client, again); err != nil {
			t.Error(err)
		}
	}

	a.write(t, func(txn statedb.WriteTxn) error { return a.w.SetBackends(txn, web, lb.SourceK8s, backends(0)...) })
	a.waitDone(t, 10*time.Second)
	if pins.repin != nil {
		t.Fatal("the reconciler deleted no pin: the void one was not cleared")
	}
	if v, ok, _ := maps.Affinity.Lookup(client); !ok || v != again {
		t.Errorf("the client's pin is %+v (held %v), want the one the datapath made again after the walk, %+v", v, ok, again)
	}
}
