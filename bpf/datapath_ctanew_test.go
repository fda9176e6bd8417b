package bpf_test

import (
	"net/netip"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// sendSYN runs lb_tc_ingress on a SYN of f with sequence number seq and
// returns the packet's flow after.
func (h *dpHarness) sendSYN(f tuple, seq uint32) tuple {
	h.t.Helper()
	verdict, out := h.run("lb_tc_ingress", bpftest.TCPPacketSeq(h.t, f, 16, "S", seq))
	if verdict != actOK {
		h.t.Fatalf("the SYN of %v (seq %d): verdict %d", f, seq, verdict)
	}
	return decode(h.t, out)
}

// A client's new connection on the port of a flow that never got going
// (refused by a RST, or never answered) leaves no TIME_WAIT behind, so
// it may come while the old flow's entries live: it is balanced anew and
// reaches a backend in rotation, not the one the old flow had, and the
// new backend's replies are translated. The SYN of the unanswered flow
// again (a retransmission: same sequence number) and a new connection
// on the port of an established flow keep their backend, as before.
func TestTCNewConnectionAfterARefusedOrUnansweredFlowIsBalancedAnew(t *testing.T) {
	for _, reports := range []bool{false, true} {
		t.Run(map[bool]string{false: "reports-off", true: "reports-on"}[reports], func(t *testing.T) {
			testNewConnectionBalancedAnew(t, reports)
		})
	}
}

func testNewConnectionBalancedAnew(t *testing.T, reports bool) {
	h := newDatapathOptions(t, dpConfig(), bpf.DatapathOptions{CTTimeouts: testTimeouts, ConnectionReports: reports})
	h.backend(1, "10.1.0.1:8080/TCP", lb.BackendActive)
	h.backend(2, "10.1.0.2:8080/TCP", lb.BackendActive)
	h.frontend(testFrontend{addr: "10.96.0.1:80/TCP", id: 1, slots: []uint32{1}})
	old, next := netip.MustParseAddrPort("10.1.0.1:8080"), netip.MustParseAddrPort("10.1.0.2:8080")

	refused := flow("10.0.0.5:40000", "10.96.0.1:80", lb.ProtoTCP)
	refusedOut := h.sendSYN(refused, 1)
	h.sendTCP("lb_tc_egress", refusedOut.Reply(), "RA")
	unanswered := flow("10.0.0.5:40001", "10.96.0.1:80", lb.ProtoTCP)
	unansweredOut := h.sendSYN(unanswered, 1)
	established := flow("10.0.0.5:40002", "10.96.0.1:80", lb.ProtoTCP)
	estOut := h.sendSYN(established, 1)
	h.sendTCP("lb_tc_egress", estOut.Reply(), "SA")
	h.sendTCP("lb_tc_ingress", established, "A")
	h.sendTCP("lb_tc_ingress", established, "FA")
	h.sendTCP("lb_tc_egress", estOut.Reply(), "FA")
	for _, out := range []tuple{refusedOut, unansweredOut, estOut} {
		if out.Dst != old {
			t.Fatalf("a first flow went to %v, want %v", out.Dst, old)
		}
	}

	// Backend 1 leaves rotation (as a tripped breaker takes it out).
	h.frontend(testFrontend{addr: "10.96.0.1:80/TCP", id: 1, slots: []uint32{2}})

	if got := h.sendSYN(unanswered, 1); got.Dst != old {
		t.Errorf("the unanswered flow's SYN again (a retransmission) went to %v, want its backend %v", got.Dst, old)
	}
	for _, f := range []tuple{refused, unanswered} {
		got := h.sendSYN(f, 1000)
		if got.Dst != next {
			t.Errorf("a new connection from %v after a flow that never got going went to %v, want %v", f.Src, got.Dst, next)
			continue
		}
		if verdict, back := h.sendTCP("lb_tc_egress", got.Reply(), "SA"); verdict != actOK || back != f.Reply() {
			t.Errorf("the new backend's SYN-ACK %v became %v (verdict %d), want %v", got.Reply(), back, verdict, f.Reply())
		}
		oldReply := f.Reply()
		oldReply.Src = old
		if v, ok := h.ct(oldReply); ok {
			t.Errorf("the old flow's reply entry %v is still there: %+v", oldReply, v)
		}
	}
	if got := h.sendSYN(established, 1000); got.Dst != old {
		t.Errorf("a new connection on an established flow's port went to %v, want its backend %v", got.Dst, old)
	}
}
