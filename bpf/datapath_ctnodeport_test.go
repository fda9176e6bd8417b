package bpf_test

import (
	"net/netip"
	"testing"

	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// One client port may talk to a NodePort on the any-address through two
// node addresses at once: two flows of one frontend (one lb_rev_nat ID)
// that differ only in the address the client sent to. The second flow
// must not take the first's entry under the client's key: each keeps its
// backend, and the first flow's replies stay translated. The packets run
// in a network namespace of the test's own where the node does not
// forward, so that every address is the node's.
func TestTCNodePortFlowsThroughTwoNodeAddressesKeepTheirBackends(t *testing.T) {
	h := newDatapath(t, dpConfig())
	h.backend(1, "10.1.0.1:53/UDP", lb.BackendActive)
	h.backend(2, "10.1.0.2:53/UDP", lb.BackendActive)
	h.frontend(testFrontend{addr: "0.0.0.0:30053/UDP", typ: lb.SVCTypeNodePort, id: 1, slots: []uint32{1}})
	ns := bpftest.NewNetns(t)
	first := flow("192.0.2.9:40000", "203.0.113.9:30053", lb.ProtoUDP)
	second := flow("192.0.2.9:40000", "203.0.113.10:30053", lb.ProtoUDP)
	to := []netip.AddrPort{netip.MustParseAddrPort("10.1.0.1:53"), netip.MustParseAddrPort("10.1.0.2:53")}

	if _, out := h.runInNetns(ns, "lb_tc_ingress", first); out.Dst != to[0] {
		t.Fatalf("the first flow went to %v, want %v", out.Dst, to[0])
	}
	// New flows now go to backend 2 only.
	h.frontend(testFrontend{addr: "0.0.0.0:30053/UDP", typ: lb.SVCTypeNodePort, id: 1, slots: []uint32{2}})
	if _, out := h.runInNetns(ns, "lb_tc_ingress", second); out.Dst != to[1] {
		t.Fatalf("the second flow went to %v, want %v", out.Dst, to[1])
	}
	for i, f := range []tuple{first, second} {
		if verdict, out := h.runInNetns(ns, "lb_tc_ingress", f); verdict != actOK || out.Dst != to[i] {
			t.Errorf("%v went to %v (verdict %d), want %v", f, out.Dst, verdict, to[i])
		}
		reply := flow(to[i].String(), f.Src.String(), lb.ProtoUDP)
		if verdict, back := h.runInNetns(ns, "lb_tc_egress", reply); verdict != actOK || back != f.Reply() {
			t.Errorf("the reply %v of %v became %v (verdict %d), want %v", reply, f, back, verdict, f.Reply())
		}
	}
}

// The replies of a flow to a NodePort on the any-address come from the
// node address and port the client sent to (the lb_rev_nat address is
// the any-address), IPv4 (one entry) and IPv6 (two entries) alike.
func TestTCNodePortRepliesComeFromTheAddressTheClientSentTo(t *testing.T) {
	h := newDatapath(t, dpConfig())
	h.backend(1, "10.1.0.1:53/UDP", lb.BackendActive)
	h.backend(2, "[fd00::1]:53/UDP", lb.BackendActive)
	h.frontend(testFrontend{addr: "0.0.0.0:30053/UDP", typ: lb.SVCTypeNodePort, id: 1, slots: []uint32{1}})
	h.frontend(testFrontend{addr: "[::]:30053/UDP", typ: lb.SVCTypeNodePort, id: 2, slots: []uint32{2}})
	ns := bpftest.NewNetns(t)
	for _, c := range []struct {
		f  tuple
		to string
	}{
		{flow("192.0.2.9:40000", "203.0.113.9:30053", lb.ProtoUDP), "10.1.0.1:53"},
		{flow("[2001:db8::9]:40000", "[2001:db8::1]:30053", lb.ProtoUDP), "[fd00::1]:53"},
	} {
		_, in := h.runInNetns(ns, "lb_tc_ingress", c.f)
		_, back := h.runInNetns(ns, "lb_tc_egress", flow(c.to, c.f.Src.String(), lb.ProtoUDP))
		if in.Dst.String() != c.to {
			t.Fatalf("%v went to %v, want %v", c.f, in.Dst, c.to)
		}
		if back != c.f.Reply() {
			t.Errorf("the reply of %v became %v, want %v", c.f, back, c.f.Reply())
		}
	}
}
