package bpf_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// An ICMP error about a balanced flow reaches the other side translated
// as the flow's packets are: the packet it quotes is, byte for byte, the
// packet its receiver sent (addresses, ports, IPv4 header and L4
// checksums), and the error's own addresses and checksums follow.
//
//   - "fragmentation needed" / "packet too big" from the backend about a
//     client's packet (client -> backend after DNAT), on its way to the
//     client: from the frontend, quoting client -> frontend;
//   - the same from a router on the client's side about a reply
//     (frontend -> client after reverse NAT), sent to the frontend: to
//     the backend, quoting backend -> client.
//
// An error about a balanced flow that cannot be translated is dropped and
// counted; one about no balanced flow passes as it came.
func TestTCTranslatesICMPErrorsAboutBalancedFlows(t *testing.T) {
	for _, tc := range []struct{ fe, backend, client, router string }{
		{"10.96.0.1:80", "10.1.0.1:8080", "10.0.0.5:40000", "10.0.0.254"},
		{"[fd00:96::1]:80", "[fd00:1::1]:8080", "[fd00::5]:40000", "fd00::fe"},
	} {
		for _, proto := range []lb.Protocol{lb.ProtoTCP, lb.ProtoUDP} {
			t.Run(fmt.Sprintf("%s/%s", tc.fe, proto), func(t *testing.T) {
				h := newDatapath(t, dpConfig())
				h.backend(1, tc.backend+"/"+proto.String(), lb.BackendActive)
				h.frontend(testFrontend{addr: tc.fe + "/" + proto.String(), id: 1, slots: []uint32{1}})
				fe, backend, client := netip.MustParseAddrPort(tc.fe), netip.MustParseAddrPort(tc.backend), netip.MustParseAddrPort(tc.client)
				router := netip.MustParseAddr(tc.router)

				sent := bpftest.TCPPacket(t, flow(tc.client, tc.fe, proto), 64, "S")
				v, dnat := h.run("lb_tc_ingress", sent)
				if v != actOK {
					t.Fatalf("request: verdict %d", v)
				}
				reply := bpftest.TCPPacket(t, flow(tc.backend, tc.client, proto), 64, "SA")
				v, rnat := h.run("lb_tc_egress", reply)
				if v != actOK {
					t.Fatalf("reply: verdict %d", v)
				}

				icmpCase(t, h, "lb_tc_egress", "from the backend about a request",
					bpftest.ICMPError(backend.Addr(), client.Addr(), dnat[14:len(sent)]),
					fe.Addr(), client.Addr(), sent[14:])
				icmpCase(t, h, "lb_tc_ingress", "from a router about a reply",
					bpftest.ICMPError(router, fe.Addr(), rnat[14:len(reply)]),
					router, backend.Addr(), reply[14:])

				// An error about a balanced flow that cannot be
				// translated (its frontend gone) is dropped, counted.
				h.check(h.maps.RevNat.Delete(1))
				if v, _ := h.run("lb_tc_egress", bpftest.ICMPError(backend.Addr(), client.Addr(), dnat[14:len(sent)])); v != actShot {
					t.Errorf("an error about a flow whose frontend is gone: verdict %d, want it dropped", v)
				}
				if n := h.drops(1, bpf.DropICMP); n != 1 {
					t.Errorf("%d drops for %s, want 1", n, bpf.DropReasons[bpf.DropICMP])
				}

				other := bpftest.TCPPacket(t, flow(netip.AddrPortFrom(client.Addr(), 40001).String(), tc.backend, proto), 64, "S")
				foreign := bpftest.ICMPError(backend.Addr(), client.Addr(), other[14:])
				if v, out := h.run("lb_tc_egress", foreign); v != actOK || !bytes.Equal(out[:len(foreign)], foreign) {
					t.Errorf("an error about no balanced flow: verdict %d, changed %v", v, !bytes.Equal(out[:len(foreign)], foreign))
				}
			})
		}
	}
}

func icmpCase(t *testing.T, h *dpHarness, prog, what string, frame []byte, wantSrc, wantDst netip.Addr, wantQuote []byte) {
	t.Helper()
	v, out := h.run(prog, frame)
	if v != actOK {
		t.Fatalf("%s: verdict %d", what, v)
	}
	src, dst, sumsOK, quote := bpftest.ICMPErrorParts(out[:len(frame)])
	if src != wantSrc || dst != wantDst {
		t.Errorf("%s: went from %s to %s, want %s to %s", what, src, dst, wantSrc, wantDst)
	}
	if !sumsOK {
		t.Errorf("%s: its IPv4 header or ICMP checksum is wrong", what)
	}
	if !bytes.Equal(quote, wantQuote) {
		t.Errorf("%s: quotes\n%x\nwant the packet as its receiver sent it\n%x", what, quote, wantQuote)
	}
}
