package bpf_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// A packet a NIC received with CHECKSUM_COMPLETE carries the sum of its
// bytes in skb->csum, which the stack uses to verify the L4 checksum
// later. NAT must keep that sum right: for IPv6, whose header has no
// checksum to balance an address change, bpf_l4_csum_replace must be told
// the packet is IPv6 (BPF_F_IPV6). PROG_TEST_RUN with
// BPF_F_TEST_SKB_CHECKSUM_COMPLETE gives the program such a packet and
// fails the run with EBADMSG if skb->csum no longer matches the bytes:
// both directions, TCP and UDP, IPv6 and IPv4, are run so.
func TestTCKeepsChecksumCompleteRightThroughNAT(t *testing.T) {
	for _, tc := range []struct{ fe, backend, client string }{
		{"[fd00:96::1]:80", "[fd00:1::1]:8080", "[fd00::5]:40000"},
		{"10.96.0.1:80", "10.1.0.1:8080", "10.0.0.5:40000"},
	} {
		for _, proto := range []lb.Protocol{lb.ProtoTCP, lb.ProtoUDP} {
			t.Run(fmt.Sprintf("%s/%s", tc.fe, proto), func(t *testing.T) {
				h := newDatapath(t, dpConfig())
				h.backend(1, tc.backend+"/"+proto.String(), lb.BackendActive)
				h.frontend(testFrontend{addr: tc.fe + "/" + proto.String(), id: 1, slots: []uint32{1}})
				f := flow(tc.client, tc.fe, proto)
				out := runChecksumComplete(t, h, "lb_tc_ingress", bpftest.TCPPacket(t, f, 40, "S"))
				if got := decode(t, out); got.Dst.String() != tc.backend {
					t.Fatalf("request went to %s, want %s", got.Dst, tc.backend)
				}
				reply := flow(tc.backend, tc.client, proto)
				out = runChecksumComplete(t, h, "lb_tc_egress", bpftest.TCPPacket(t, reply, 40, "SA"))
				if got := decode(t, out); got.Src.String() != tc.fe {
					t.Fatalf("reply left from %s, want %s", got.Src, tc.fe)
				}
			})
		}
	}
}

// runChecksumComplete runs prog on pkt as a CHECKSUM_COMPLETE packet.
func runChecksumComplete(t *testing.T, h *dpHarness, prog string, pkt []byte) []byte {
	t.Helper()
	out := make([]byte, len(pkt)+256)
	opts := &ebpf.RunOptions{Data: pkt, DataOut: out, Flags: unix.BPF_F_TEST_SKB_CHECKSUM_COMPLETE}
	verdict, err := h.dp.Program(prog).Run(opts)
	if errors.Is(err, unix.EBADMSG) {
		t.Fatalf("%s: skb->csum no longer matches the packet it rewrote (EBADMSG)", prog)
	}
	if err != nil {
		t.Fatalf("%s: %v", prog, err)
	}
	if verdict != actOK {
		t.Fatalf("%s: verdict %d", prog, verdict)
	}
	return opts.DataOut
}
