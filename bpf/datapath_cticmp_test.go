package bpf_test

import (
	"net/netip"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// A flow with two entries that is balanced anew into one entry (its
// backend left lb_backends; the flow that held the client's key ended)
// leaves its forward entry behind, live. An ICMP error about its replies
// finds the flow as its packets do, by the one entry first, and is
// translated to the new backend, not dropped for the old one.
func TestTCICMPErrorAboutAFlowBalancedAnewIntoOneEntryFindsItsNewBackend(t *testing.T) {
	h := newDatapath(t, dpConfig())
	h.backend(1, "10.1.0.1:53/UDP", lb.BackendActive)
	h.backend(2, "10.1.0.2:53/UDP", lb.BackendActive)
	h.backend(3, "10.1.0.3:53/UDP", lb.BackendActive)
	h.frontend(testFrontend{addr: "10.96.0.10:53/UDP", id: 1, slots: []uint32{1}})
	h.frontend(testFrontend{addr: "10.96.0.11:53/UDP", id: 2, slots: []uint32{2}})
	holder := flow("10.0.0.5:40000", "10.96.0.10:53", lb.ProtoUDP)
	f := flow("10.0.0.5:40000", "10.96.0.11:53", lb.ProtoUDP)
	h.balance(holder)
	if got := h.balance(f).Dst; got != netip.MustParseAddrPort("10.1.0.2:53") {
		t.Fatalf("the flow went to %v", got)
	}
	// The holder ends; the flow's backend leaves: it is balanced anew.
	k := bpf.NewCTClientKey(holder.Src, uint8(holder.Proto))
	v, _, err := h.maps.Conntrack.Lookup(k)
	h.check(err)
	v.Expires = monotonicSeconds(t) - 10
	h.check(h.maps.Conntrack.Update(k, v))
	h.check(h.maps.Backends.Delete(2))
	h.frontend(testFrontend{addr: "10.96.0.11:53/UDP", id: 2, slots: []uint32{3}})
	backend := netip.MustParseAddrPort("10.1.0.3:53")
	if got := h.balance(f).Dst; got != backend {
		t.Fatalf("balanced anew, the flow went to %v, want %v", got, backend)
	}
	reply := bpftest.TCPPacket(t, flow(backend.String(), f.Src.String(), lb.ProtoUDP), 64, "")
	v2, rnat := h.run("lb_tc_egress", reply)
	if got := decode(t, rnat); v2 != actOK || got != f.Reply() {
		t.Fatalf("the reply became %v (verdict %d)", got, v2)
	}
	icmpCase(t, h, "lb_tc_ingress", "from a router about a reply",
		bpftest.ICMPError(netip.MustParseAddr("10.0.0.254"), f.Dst.Addr(), rnat[14:len(reply)]),
		netip.MustParseAddr("10.0.0.254"), backend.Addr(), reply[14:])
}
