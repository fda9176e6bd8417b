package bpf_test

import (
	"net/netip"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// duringCollection is a conntrack map whose first Lookup or
// LookupAndDelete, the collector's second look at the entries its walk
// found expired, first runs fn: the datapath writing between the walk
// and the deletion.
type duringCollection struct {
	bpf.Map[bpf.CTKey, bpf.CTValue]
	fn func()
}

func (m *duringCollection) Lookup(k bpf.CTKey) (bpf.CTValue, bool, error) {
	m.run()
	return m.Map.Lookup(k)
}

// LookupAndDelete is the collector's deletion of an entry its walk found
// expired (bpf.DeleteStale), which also reads it again.
func (m *duringCollection) LookupAndDelete(k bpf.CTKey) (bpf.CTValue, bool, error) {
	m.run()
	return m.Map.(interface {
		LookupAndDelete(bpf.CTKey) (bpf.CTValue, bool, error)
	}).LookupAndDelete(k)
}

func (m *duringCollection) Create(k bpf.CTKey, v bpf.CTValue) error {
	return m.Map.(interface {
		Create(bpf.CTKey, bpf.CTValue) error
	}).Create(k, v)
}

func (m *duringCollection) run() {
	if m.fn != nil {
		m.fn()
		m.fn = nil
	}
}

// A flow with two entries (IPv6 to a NodePort on the any-address) that a
// client opens from a port whose earlier flow just ended, while the
// collector is between its walk and its deletions, keeps its client's
// key held: the collector does not delete the marker the new flow relies
// on, so the flow keeps its backend and its replies their translation.
func TestCTCollectorKeepsTheMarkerOfATwoEntryFlowOpenedDuringTheCollection(t *testing.T) {
	h := newDatapath(t, dpConfig())
	h.backend(1, "[fd00::1]:53/UDP", lb.BackendActive)
	h.backend(2, "[fd00::2]:53/UDP", lb.BackendActive)
	h.frontend(testFrontend{addr: "[::]:30053/UDP", typ: lb.SVCTypeNodePort, id: 1, slots: []uint32{1}})
	ns := bpftest.NewNetns(t)
	f := flow("[2001:db8::9]:40000", "[2001:db8::1]:30053", lb.ProtoUDP)
	backend := netip.MustParseAddrPort("[fd00::1]:53")
	if _, out := h.runInNetns(ns, "lb_tc_ingress", f); out.Dst != backend {
		t.Fatalf("the first flow went to %v, want %v", out.Dst, backend)
	}
	// The first flow, begun a while ago, ends: its two entries expire,
	// and its marker (dead from the start) is of when it began.
	for _, k := range []bpf.CTKey{bpf.NewCTKey(f.Src, f.Dst, uint8(f.Proto)), bpf.NewCTKey(backend, f.Src, uint8(f.Proto)), bpf.NewCTClientKey(f.Src, uint8(f.Proto))} {
		v, ok, err := h.maps.Conntrack.Lookup(k)
		if err != nil || !ok {
			t.Fatalf("no entry %+v (%v): want the flow's two entries and its marker", k, err)
		}
		v.Expires = monotonicSeconds(t) - 10
		h.check(h.maps.Conntrack.Update(k, v))
	}
	// The client opens a new flow from the same port while the collector
	// is between its walk and its deletions.
	ct := &duringCollection{Map: h.maps.Conntrack, fn: func() {
		if _, out := h.runInNetns(ns, "lb_tc_ingress", f); out.Dst != backend {
			t.Errorf("the second flow went to %v, want %v", out.Dst, backend)
		}
	}}
	if _, err := bpf.CollectConntrack(h.maps, ct); err != nil {
		t.Fatal(err)
	}
	// New flows now go to backend 2: the second flow must not.
	h.frontend(testFrontend{addr: "[::]:30053/UDP", typ: lb.SVCTypeNodePort, id: 1, slots: []uint32{2}})
	if verdict, back := h.runInNetns(ns, "lb_tc_egress", flow(backend.String(), f.Src.String(), lb.ProtoUDP)); verdict != actOK || back.Src == backend {
		t.Errorf("the second flow's reply passed untranslated (verdict %d, %v)", verdict, back)
	}
	if _, out := h.runInNetns(ns, "lb_tc_ingress", f); out.Dst != backend {
		t.Errorf("the second flow's next packet went to %v, want its backend %v", out.Dst, backend)
	}
}
