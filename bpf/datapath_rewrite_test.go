package bpf_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// The tc programs update a plain packet's L4 checksum themselves, with no
// helper (c/rewrite.h): PROG_TEST_RUN's packets are such packets
// (CHECKSUM_NONE). Every client address and port, both directions, both
// families, TCP and UDP, leaves with its checksums right (decode checks
// them) and its addresses translated.
func TestTCRewriteKeepsChecksumsRightForEveryClient(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 1))
	for _, fam := range []struct{ fe, backend, prefix string }{
		{"10.96.0.1:80", "10.1.0.1:8080", "10.0."},
		{"[fd00:96::1]:80", "[fd00:1::1]:8080", "fd00:"},
	} {
		for _, proto := range []lb.Protocol{lb.ProtoTCP, lb.ProtoUDP} {
			t.Run(fmt.Sprintf("%s/%s", fam.fe, proto), func(t *testing.T) {
				h := newDatapath(t, dpConfig())
				h.backend(1, fam.backend+"/"+proto.String(), lb.BackendActive)
				h.frontend(testFrontend{addr: fam.fe + "/" + proto.String(), id: 1, slots: []uint32{1}})
				fe, backend := netip.MustParseAddrPort(fam.fe), netip.MustParseAddrPort(fam.backend)
				for range 100 {
					client := fmt.Sprintf("%s%d.%d:%d", fam.prefix, rng.IntN(256), rng.IntN(256), 1024+rng.IntN(64000))
					if fam.prefix == "fd00:" {
						client = fmt.Sprintf("[fd00::%x:%x]:%d", rng.IntN(65536), rng.IntN(65536), 1024+rng.IntN(64000))
					}
					f := flow(client, fam.fe, proto)
					out := h.balance(f)
					if out.Dst != backend || out.Src != f.Src {
						t.Fatalf("%v went out as %v, want to %s", f, out, backend)
					}
					if _, back := h.send("lb_tc_egress", out.Reply()); back.Src != fe || back.Dst != f.Src {
						t.Fatalf("the reply of %v went out as %v, want from %s", f, back, fe)
					}
				}
			})
		}
	}
}

// A UDP checksum that computes to 0 is sent as 0xffff (RFC 768: 0 would
// mean "no checksum" in IPv4, and is invalid in IPv6), as the kernel's
// helpers do with BPF_F_MARK_MANGLED_0. The client's datagram is made so
// that, once translated, its checksum computes to 0.
func TestTCUDPChecksumComputingToZeroIsSentAsAllOnes(t *testing.T) {
	for _, tc := range []struct {
		fe, backend, client string
		udpOff              int
	}{
		{"10.96.0.10:53", "10.1.0.1:5353", "10.0.0.5:40000", 14 + 20},
		{"[fd00:96::10]:53", "[fd00:1::1]:5353", "[fd00::5]:40000", 14 + 40},
	} {
		t.Run(tc.fe, func(t *testing.T) {
			h := newDatapath(t, dpConfig())
			h.backend(1, tc.backend+"/UDP", lb.BackendActive)
			h.frontend(testFrontend{addr: tc.fe + "/UDP", id: 1, slots: []uint32{1}})
			f := flow(tc.client, tc.fe, lb.ProtoUDP)
			backend := netip.MustParseAddrPort(tc.backend)
			pkt := packet(t, f, 32)
			udp := pkt[tc.udpOff:]

			// The first payload word w completes the translated datagram's
			// sum to 0xffff: w is the checksum it has without w.
			nat := append([]byte(nil), udp...)
			binary.BigEndian.PutUint16(nat[2:], backend.Port())
			nat[8], nat[9] = 0, 0
			w := bpftest.UDPChecksum(f.Src.Addr(), backend.Addr(), nat)
			binary.BigEndian.PutUint16(udp[8:], w)
			binary.BigEndian.PutUint16(udp[6:], bpftest.UDPChecksum(f.Src.Addr(), f.Dst.Addr(), udp))

			verdict, out := h.run("lb_tc_ingress", pkt)
			if got := decode(t, out); verdict != actOK || got.Dst != backend {
				t.Fatalf("verdict %d, to %s", verdict, got.Dst)
			}
			if got := binary.BigEndian.Uint16(out[tc.udpOff+6:]); got != 0xffff {
				t.Errorf("the UDP checksum went out as %#04x, want 0xffff", got)
			}
		})
	}
}
