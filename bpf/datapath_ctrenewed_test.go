package bpf_test

import (
	"fmt"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// renewing is a conntrack map that runs renew once, at the collector's
// first step on its own (one key's check or deletion, or a batch's
// deletion) that comes after (or, with before, at) its step on key:
// the datapath writing key between the collector's judgement of it and
// its deletion, or before both.
type renewing struct {
	bpf.Map[bpf.CTKey, bpf.CTValue]
	key          bpf.CTKey
	before, seen bool
	renew        func()
}

// step runs renew if it is due at a step on k.
func (m *renewing) step(k bpf.CTKey, one bool) {
	if m.renew != nil && (m.seen || m.before && one && k == m.key) {
		m.renew()
		m.renew = nil
	}
	if one && k == m.key {
		m.seen = true
	}
}

func (m *renewing) Lookup(k bpf.CTKey) (bpf.CTValue, bool, error) {
	m.step(k, true)
	return m.Map.Lookup(k)
}

func (m *renewing) Delete(k bpf.CTKey) error {
	m.step(k, true)
	return m.Map.Delete(k)
}

func (m *renewing) BatchDelete(ks []bpf.CTKey) error {
	m.step(bpf.CTKey{}, false)
	return m.Map.BatchDelete(ks)
}

func (m *renewing) LookupAndDelete(k bpf.CTKey) (bpf.CTValue, bool, error) {
	m.step(k, true)
	return m.Map.(interface {
		LookupAndDelete(bpf.CTKey) (bpf.CTValue, bool, error)
	}).LookupAndDelete(k)
}

func (m *renewing) Create(k bpf.CTKey, v bpf.CTValue) error {
	return m.Map.(interface {
		Create(bpf.CTKey, bpf.CTValue) error
	}).Create(k, v)
}

// A flow that a client opens from the port of an expired flow while the
// collector runs keeps its entry, whether the datapath writes it before
// the collector looks at the old one or after (the collector once read
// every expired entry again, then deleted them all in one batch: a flow
// begun between the two lost its entry, its replies passed untranslated
// and its next packet was balanced anew).
func TestCTCollectorNeverDeletesAFlowBegunOnAnExpiredEntryDuringTheCollection(t *testing.T) {
	for _, before := range []bool{false, true} {
		t.Run(fmt.Sprintf("renewed before its check %v", before), func(t *testing.T) {
			h := newDatapath(t, dpConfig())
			h.dnsFrontendOfEight()
			// The flow, and others, long expired: the collector deletes
			// all but the one begun again.
			var f tuple
			for i := range 8 {
				g := flow(fmt.Sprintf("10.0.0.%d:40000", i+1), "10.96.0.10:53", lb.ProtoUDP)
				if i == 3 {
					f = g
				}
				h.run("lb_tc_ingress", bpftest.Packet(t, g, 16))
				k, v, ok := h.ctEntry(g)
				if !ok {
					t.Fatalf("flow %v has no entry", g)
				}
				v.Expires = monotonicSeconds(t) - 10
				h.check(h.maps.Conntrack.Update(k, v))
			}
			key, _, _ := h.ctEntry(f)
			var to tuple
			ct := &renewing{Map: h.maps.Conntrack, key: key, before: before, renew: func() {
				_, to = h.sendUDP("lb_tc_ingress", f)
			}}
			c, err := bpf.CollectConntrack(h.maps, ct)
			if err != nil {
				t.Fatal(err)
			}
			if ct.renew != nil { // the flow's entry was the collector's last step
				ct.renew()
			}
			// Renewed after its check, the flow's old entry went, and
			// the new one came after.
			if want := map[bool]int{true: 7, false: 8}[before]; c.Expired != want {
				t.Errorf("the collector deleted %d entries, want %d", c.Expired, want)
			}
			v, ok := h.ct(f)
			if !ok || v.Expires < monotonicSeconds(t) || h.backendAddr(v.BackendID) != to.Dst {
				t.Fatalf("the flow begun during the collection has entry %+v (found %v), want a live one to %v", v, ok, to.Dst)
			}
			if verdict, back := h.sendUDP("lb_tc_egress", flow(to.Dst.String(), f.Src.String(), lb.ProtoUDP)); verdict != actOK || back.Src != f.Dst {
				t.Errorf("its reply left from %v (verdict %d), want the frontend %v", back.Src, verdict, f.Dst)
			}
			if _, next := h.sendUDP("lb_tc_ingress", f); next.Dst != to.Dst {
				t.Errorf("its next packet went to %v, want its backend %v", next.Dst, to.Dst)
			}
		})
	}
}

// sendUDP runs prog on a UDP packet of f and returns its verdict and the
// packet's flow after.
func (h *dpHarness) sendUDP(prog string, f tuple) (uint32, tuple) {
	h.t.Helper()
	verdict, out := h.run(prog, bpftest.Packet(h.t, f, 16))
	return verdict, decode(h.t, out)
}
