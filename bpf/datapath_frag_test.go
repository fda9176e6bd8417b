package bpf_test

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// Every fragment of a datagram to a frontend goes to the backend the first
// fragment chose, and every fragment of a reply leaves from the frontend:
// later fragments carry no ports, so the first one's are remembered by
// (source, destination, protocol, fragment ID). The UDP checksum, in the
// first fragment, is right for the whole datagram as translated. IPv4,
// and IPv6 with extension headers before the fragment header.
func TestTCTranslatesEveryFragmentOfAFlow(t *testing.T) {
	for _, tc := range []struct{ fe, backend, client string }{
		{"10.96.0.1:53", "10.1.0.1:5353", "10.0.0.5:40000"},
		{"[fd00:96::1]:53", "[fd00:1::1]:5353", "[fd00::5]:40000"},
	} {
		t.Run(tc.fe, func(t *testing.T) {
			h := newDatapath(t, dpConfig())
			h.backend(1, tc.backend+"/UDP", lb.BackendActive)
			h.frontend(testFrontend{addr: tc.fe + "/UDP", id: 1, slots: []uint32{1}})
			client, fe, backend := netip.MustParseAddrPort(tc.client), netip.MustParseAddrPort(tc.fe), netip.MustParseAddrPort(tc.backend)

			out := h.fragments("lb_tc_ingress", client, fe, 7)
			checkDatagram(t, out, client, backend)
			out = h.fragments("lb_tc_egress", backend, client, 8)
			checkDatagram(t, out, fe, client)

			// A later fragment whose first one never came could be of
			// a balanced flow: dropped and counted, never passed as is.
			frags := fragmentUDP(t, client, fe, 9, 64)
			if v, _ := h.run("lb_tc_ingress", frags[1]); v != actShot {
				t.Fatalf("a later fragment without its first: verdict %d, want it dropped", v)
			}
			if n := h.drops(0, bpf.DropFragNoFirst); n != 1 {
				t.Fatalf("%d drops for %s, want 1", n, bpf.DropReasons[bpf.DropFragNoFirst])
			}
		})
	}
}

// fragments sends a fragmented UDP datagram from src to dst through prog,
// which must pass both fragments, and returns them as they left.
func (h *dpHarness) fragments(prog string, src, dst netip.AddrPort, id uint32) [][]byte {
	h.t.Helper()
	var out [][]byte
	for i, f := range fragmentUDP(h.t, src, dst, id, 64) {
		v, pkt := h.run(prog, f)
		if v != actOK {
			for r := uint32(1); r <= 8; r++ {
				h.t.Logf("drops %s: %d", bpf.DropReasons[r], h.drops(1, r))
			}
			h.t.Fatalf("%s: fragment %d: verdict %d", prog, i, v)
		}
		out = append(out, pkt)
	}
	return out
}

var fragmentUDP = bpftest.FragmentUDP

// checkDatagram checks that both fragments go from src to dst (their
// IPv4 header checksums right) and that the datagram they make has src's
// and dst's ports and a UDP checksum right for them.
func checkDatagram(t *testing.T, frags [][]byte, src, dst netip.AddrPort) {
	t.Helper()
	var udp []byte
	for i, f := range frags {
		var s, d netip.Addr
		var data []byte
		if f[12] == 0x08 {
			ip := f[14:34]
			if bpftest.Sum(0, ip) != 0xffff {
				t.Errorf("fragment %d: IPv4 header checksum wrong", i)
			}
			s, d, data = netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20])), f[34:]
		} else {
			s, d, data = netip.AddrFrom16([16]byte(f[22:38])), netip.AddrFrom16([16]byte(f[38:54])), f[14+40+24:]
		}
		if s != src.Addr() || d != dst.Addr() {
			t.Errorf("fragment %d went from %s to %s, want %s to %s", i, s, d, src.Addr(), dst.Addr())
		}
		udp = append(udp, data...)
	}
	udp = udp[:binary.BigEndian.Uint16(udp[4:])]
	if sp, dp := binary.BigEndian.Uint16(udp[0:]), binary.BigEndian.Uint16(udp[2:]); sp != src.Port() || dp != dst.Port() {
		t.Errorf("ports %d to %d, want %d to %d", sp, dp, src.Port(), dst.Port())
	}
	if got, want := binary.BigEndian.Uint16(udp[6:]), bpftest.UDPChecksum(src.Addr(), dst.Addr(), udp); got != want {
		t.Errorf("UDP checksum %#04x, want %#04x for the translated datagram", got, want)
	}
}
