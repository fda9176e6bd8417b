package bpf_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// ICMP errors about a flow to a NodePort on the any-address name the node
// address the client sent to, as the flow's replies do, not the
// any-address of the frontend's lb_rev_nat entry: an error from the
// backend about the client's packet comes from that address and quotes
// the packet as the client sent it; one from a router about a reply goes
// to the backend. IPv4 (one entry) and IPv6 (two entries), TCP and UDP.
func TestTCICMPErrorsAboutNodePortFlowsNameTheAddressTheClientSentTo(t *testing.T) {
	// One datapath for the four cases: loading it is most of the time.
	h := newDatapath(t, dpConfig())
	ns := bpftest.NewNetns(t)
	id := uint32(0)
	for _, tc := range []struct{ fe, node, backend, client, router string }{
		{"0.0.0.0:30080", "203.0.113.9", "10.1.0.1:8080", "192.0.2.9:40000", "192.0.2.254"},
		{"[::]:30080", "2001:db8::1", "[fd00:1::1]:8080", "[2001:db8::9]:40000", "2001:db8::fe"},
	} {
		for _, proto := range []lb.Protocol{lb.ProtoTCP, lb.ProtoUDP} {
			id++
			t.Run(fmt.Sprintf("%s/%s", tc.fe, proto), func(t *testing.T) {
				h.backend(id, tc.backend+"/"+proto.String(), lb.BackendActive)
				h.frontend(testFrontend{addr: tc.fe + "/" + proto.String(), typ: lb.SVCTypeNodePort, id: id, slots: []uint32{id}})
				node := netip.MustParseAddr(tc.node)
				to := netip.AddrPortFrom(node, netip.MustParseAddrPort(tc.fe).Port())
				backend, client := netip.MustParseAddrPort(tc.backend), netip.MustParseAddrPort(tc.client)
				router := netip.MustParseAddr(tc.router)

				// The flow begins in a namespace of the test's own,
				// where the packet is to the node (no route, no
				// forwarding).
				sent := bpftest.TCPPacket(t, flow(tc.client, to.String(), proto), 64, "S")
				var (
					v    uint32
					dnat []byte
				)
				h.check(ns.Do(func() (err error) {
					if err := setForwarding(false); err != nil {
						return err
					}
					v, dnat, err = h.runIn("lb_tc_ingress", sent)
					return err
				}))
				if got := decode(t, dnat); v != actOK || got.Dst != backend {
					t.Fatalf("request: verdict %d, went to %v, want %v", v, got.Dst, backend)
				}
				reply := bpftest.TCPPacket(t, flow(tc.backend, tc.client, proto), 64, "SA")
				v, rnat := h.run("lb_tc_egress", reply)
				if got := decode(t, rnat); v != actOK || got.Src != to {
					t.Fatalf("reply: verdict %d, from %v, want %v", v, got.Src, to)
				}

				icmpCase(t, h, "lb_tc_egress", "from the backend about a request",
					bpftest.ICMPError(backend.Addr(), client.Addr(), dnat[14:len(sent)]),
					node, client.Addr(), sent[14:])
				icmpCase(t, h, "lb_tc_ingress", "from a router about a reply",
					bpftest.ICMPError(router, node, rnat[14:len(reply)]),
					router, backend.Addr(), reply[14:])
			})
		}
	}
}
