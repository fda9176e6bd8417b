package bpf_test

import (
	"net/netip"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// A client reuses a port for a connection to another frontend as soon as
// its last connection from it is closed (its TIME_WAIT holds the port
// only towards that connection's destination). When both frontends
// share the backend, the backend sees the same address pair for both
// connections: a new connection's SYN takes the closing flow's place,
// and its SYN-ACK comes back from its own frontend. Once it did not: the
// closing flow's entry, still live for the close timeout, collided with
// the new flow, whose every SYN was dropped (ct-collision) until the
// client gave up; an e2e test's connection to a LoadBalancer, after 60 to
// the NodePort of the same Service, timed out so now and then.
// A flow that is not closing still keeps its replies
// (TestTCRepliesOfTwoFrontendsNeverCollide), and so does a closing one
// against a packet that starts no connection.
func TestTCNewConnectionTakesOverAClosingFlowOfItsClientPort(t *testing.T) {
	for _, twoEntries := range []bool{false, true} {
		name := "the closing flow with one entry"
		if twoEntries {
			name = "the closing flow with two entries"
		}
		t.Run(name, func(t *testing.T) {
			h := newDatapathOptions(t, dpConfig(), bpf.DatapathOptions{CTTimeouts: testTimeouts})
			h.backend(1, "10.244.0.2:8080/TCP", lb.BackendActive)
			h.backend(2, "10.244.0.3:8080/TCP", lb.BackendActive)
			h.frontend(testFrontend{addr: "198.51.100.1:31000/TCP", id: 1, slots: []uint32{1}})
			h.frontend(testFrontend{addr: "203.0.113.10:80/TCP", id: 2, slots: []uint32{1}})
			h.frontend(testFrontend{addr: "203.0.113.11:80/TCP", id: 3, slots: []uint32{2}})
			if twoEntries {
				// A live flow of the port to another backend holds the
				// client's key: the next flow of the port takes two entries.
				h.sendTCP("lb_tc_ingress", flow("198.51.100.2:40000", "203.0.113.11:80", lb.ProtoTCP), "S")
			}
			old := flow("198.51.100.2:40000", "198.51.100.1:31000", lb.ProtoTCP)
			_, out := h.sendTCP("lb_tc_ingress", old, "S")
			reply := out.Reply()
			h.sendTCP("lb_tc_egress", reply, "SA")
			h.sendTCP("lb_tc_ingress", old, "A")
			h.sendTCP("lb_tc_ingress", old, "FA")
			h.sendTCP("lb_tc_egress", reply, "FA")
			h.sendTCP("lb_tc_ingress", old, "A")
			if v, ok := h.ct(old); !ok || v.Flags&bpf.CTFlagClosing == 0 {
				t.Fatalf("the first flow's entry is %+v (found %v), want it closing", v, ok)
			}

			next := flow("198.51.100.2:40000", "203.0.113.10:80", lb.ProtoTCP)
			if verdict, _ := h.sendTCP("lb_tc_ingress", next, "A"); verdict != actShot {
				t.Errorf("a packet that starts no connection took the closing flow's place (verdict %d)", verdict)
			}
			verdict, fwd := h.sendTCP("lb_tc_ingress", next, "S")
			if want := netip.MustParseAddrPort("10.244.0.2:8080"); verdict != actOK || fwd.Dst != want {
				t.Fatalf("the new connection's SYN went to %v (verdict %d), want %v; ct-collision drops: %d",
					fwd.Dst, verdict, want, h.drops(2, bpf.DropCTCollision))
			}
			if verdict, back := h.sendTCP("lb_tc_egress", fwd.Reply(), "SA"); verdict != actOK || back != next.Reply() {
				t.Errorf("the new connection's SYN-ACK %v became %v (verdict %d), want %v", fwd.Reply(), back, verdict, next.Reply())
			}
			if verdict, again := h.sendTCP("lb_tc_ingress", next, "A"); verdict != actOK || again.Dst != fwd.Dst {
				t.Errorf("the new connection's ACK went to %v (verdict %d), want %v", again.Dst, verdict, fwd.Dst)
			}
		})
	}
}

// A flow closed in one direction only is still a connection: a client
// that shut down its sending side still reads the backend's data, and a
// backend that did so still reads the client's. Its client's port may
// meanwhile carry a connection to another frontend (Linux's connect
// shares a port between destinations), whose SYN must not take the
// half-closed flow's place: the backend's data for it would come back
// from the new connection's frontend, and the client would lose it.
// (Once a single FIN, either way, let a new SYN take over.)
func TestTCHalfClosedFlowKeepsItsRepliesAgainstANewConnectionOfItsClientPort(t *testing.T) {
	for _, side := range []string{"the client", "the backend"} {
		t.Run(side+" closed its side", func(t *testing.T) {
			h := newDatapathOptions(t, dpConfig(), bpf.DatapathOptions{CTTimeouts: testTimeouts})
			h.backend(1, "10.244.0.2:8080/TCP", lb.BackendActive)
			h.frontend(testFrontend{addr: "198.51.100.1:31000/TCP", id: 1, slots: []uint32{1}})
			h.frontend(testFrontend{addr: "203.0.113.10:80/TCP", id: 2, slots: []uint32{1}})
			old := flow("198.51.100.2:40000", "198.51.100.1:31000", lb.ProtoTCP)
			_, out := h.sendTCP("lb_tc_ingress", old, "S")
			reply := out.Reply()
			h.sendTCP("lb_tc_egress", reply, "SA")
			h.sendTCP("lb_tc_ingress", old, "A")
			if side == "the client" {
				h.sendTCP("lb_tc_ingress", old, "FA")
				h.sendTCP("lb_tc_egress", reply, "A")
			} else {
				h.sendTCP("lb_tc_egress", reply, "FA")
				h.sendTCP("lb_tc_ingress", old, "A")
			}

			next := flow("198.51.100.2:40000", "203.0.113.10:80", lb.ProtoTCP)
			h.sendTCP("lb_tc_ingress", next, "S")
			if verdict, back := h.sendTCP("lb_tc_egress", reply, "A"); verdict != actOK || back != old.Reply() {
				t.Errorf("the half-closed flow's data from the backend %v became %v (verdict %d), want %v", reply, back, verdict, old.Reply())
			}
			if verdict, fwd := h.sendTCP("lb_tc_ingress", old, "A"); verdict != actOK || fwd.Dst != out.Dst {
				t.Errorf("the half-closed flow's packet from the client went to %v (verdict %d), want %v", fwd.Dst, verdict, out.Dst)
			}
		})
	}
}
