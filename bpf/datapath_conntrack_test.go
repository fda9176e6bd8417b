package bpf_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// sendTCP runs prog on a TCP packet of f with the given flags (see
// bpftest.TCPPacket) and returns its verdict and the packet's flow after.
func (h *dpHarness) sendTCP(prog string, f tuple, flags string) (uint32, tuple) {
	h.t.Helper()
	verdict, out := h.run(prog, bpftest.TCPPacket(h.t, f, 16, flags))
	return verdict, decode(h.t, out)
}

// ct returns the lb_ct entry that packets of f find, as the datapath
// looks: their own (a flow with two entries), or their flow's one entry,
// the client's (f's source, or its destination for a reply), if its
// frontend or backend is f's other side.
func (h *dpHarness) ct(f tuple) (bpf.CTValue, bool) {
	h.t.Helper()
	_, v, ok := h.ctEntry(f)
	return v, ok
}

// ctEntry is ct with the entry's key.
func (h *dpHarness) ctEntry(f tuple) (bpf.CTKey, bpf.CTValue, bool) {
	h.t.Helper()
	k := bpf.NewCTKey(f.Src, f.Dst, uint8(f.Proto))
	if v, ok, err := h.maps.Conntrack.Lookup(k); err != nil || ok {
		h.check(err)
		return k, v, true
	}
	k = bpf.NewCTClientKey(f.Src, uint8(f.Proto))
	if v, ok, err := h.maps.Conntrack.Lookup(k); err != nil || ok && h.flowTo(v, f.Dst) {
		h.check(err)
		return k, v, true
	}
	k = bpf.NewCTClientKey(f.Dst, uint8(f.Proto))
	if v, ok, err := h.maps.Conntrack.Lookup(k); err != nil || ok && v.Dir == bpf.CTFlow && h.backendAddr(v.BackendID) == f.Src {
		h.check(err)
		return k, v, true
	}
	return bpf.CTKey{}, bpf.CTValue{}, false
}

// flowTo says whether the one entry v is of a flow to dst (lb.h).
func (h *dpHarness) flowTo(v bpf.CTValue, dst netip.AddrPort) bool {
	h.t.Helper()
	if v.Dir != bpf.CTFlow || v.RevNatID == 0 {
		return false
	}
	if port := binary.BigEndian.Uint16(v.PeerPort[:]); port != 0 { // IPv4: the address itself
		a := dst.Addr().As16()
		return port == dst.Port() && bytes.Equal(v.Peer[8:], a[8:])
	}
	fe, ok, err := h.maps.RevNat.Lookup(v.RevNatID)
	h.check(err)
	return ok && fe.AddrPort() == dst
}

// backendAddr is backend id's address and port, as packets carry it.
func (h *dpHarness) backendAddr(id uint32) netip.AddrPort {
	h.t.Helper()
	b, ok, err := h.maps.Backends.Lookup(id)
	h.check(err)
	if !ok {
		return netip.AddrPort{}
	}
	ap := b.L3n4Addr().AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// expectCT fails unless the entries of both directions of a flow (fwd,
// the client's packets; reply, the backend's) exist with flags and an
// expiry of now + timeout (the coarse clock may be a tick off). Which
// side closed (CTFlagClientClosed, CTFlagBackendClosed) is not compared:
// TestTCHalfClosedFlowKeepsItsRepliesAgainstANewConnectionOfItsClientPort
// tests what it decides.
func (h *dpHarness) expectCT(when string, fwd, reply tuple, flags uint8, timeout time.Duration) {
	h.t.Helper()
	now := monotonicSeconds(h.t)
	for _, f := range []tuple{fwd, reply} {
		v, ok := h.ct(f)
		want := now + uint32(timeout/time.Second)
		if !ok || v.Flags&^(bpf.CTFlagClientClosed|bpf.CTFlagBackendClosed) != flags || v.Expires+1 < want || v.Expires > want {
			h.t.Errorf("%s: the entry of %v is %+v (found %v), want flags %d and expiry %d (now %d + %s)", when, f, v, ok, flags, want, now, timeout)
		}
	}
}

// testTimeouts are four timeouts apart from each other and the defaults.
var testTimeouts = bpf.CTTimeouts{SYN: 30 * time.Second, TCP: 1000 * time.Second, Close: 5 * time.Second, Other: 200 * time.Second}

// A flow's two entries share one state and expiry, with the configured
// timeouts: a SYN alone lives the SYN timeout, the backend's answer makes
// both established, a FIN (from the client) or an RST (from the backend)
// moves both to the close timeout; UDP lives the other timeout.
func TestTCConntrackLifetimeFollowsTheTCPState(t *testing.T) {
	h := newDatapathOptions(t, dpConfig(), bpf.DatapathOptions{CTTimeouts: testTimeouts})
	h.backend(1, "10.1.0.1:8080/TCP", lb.BackendActive)
	h.backend(2, "10.1.0.1:53/UDP", lb.BackendActive)
	h.frontend(testFrontend{addr: "10.96.0.1:80/TCP", id: 1, slots: []uint32{1}})
	h.frontend(testFrontend{addr: "10.96.0.1:53/UDP", id: 2, slots: []uint32{2}})

	for _, closer := range []string{"client FIN", "backend RST"} {
		f := flow("10.0.0.5:40000", "10.96.0.1:80", lb.ProtoTCP)
		if closer == "backend RST" {
			f = flow("10.0.0.5:40001", "10.96.0.1:80", lb.ProtoTCP)
		}
		_, out := h.sendTCP("lb_tc_ingress", f, "S")
		reply := out.Reply()
		h.expectCT(closer+": after the SYN", f, reply, 0, testTimeouts.SYN)
		if verdict, back := h.sendTCP("lb_tc_egress", reply, "SA"); verdict != actOK || back != f.Reply() {
			t.Fatalf("the SYN-ACK %v became %v (verdict %d)", reply, back, verdict)
		}
		h.expectCT(closer+": after the SYN-ACK", f, reply, bpf.CTFlagReplied, testTimeouts.TCP)
		h.sendTCP("lb_tc_ingress", f, "A")
		h.expectCT(closer+": after the ACK", f, reply, bpf.CTFlagReplied, testTimeouts.TCP)
		if closer == "client FIN" {
			h.sendTCP("lb_tc_ingress", f, "FA")
		} else {
			h.sendTCP("lb_tc_egress", reply, "R")
		}
		h.expectCT(closer, f, reply, bpf.CTFlagReplied|bpf.CTFlagClosing, testTimeouts.Close)
		// The rest of the close still goes through, both ways.
		if verdict, back := h.sendTCP("lb_tc_egress", reply, "FA"); verdict != actOK || back != f.Reply() {
			t.Errorf("%s: the backend's FIN %v became %v (verdict %d)", closer, reply, back, verdict)
		}
		if verdict, fwd := h.sendTCP("lb_tc_ingress", f, "A"); verdict != actOK || fwd.Dst != out.Dst {
			t.Errorf("%s: the client's last ACK went to %v (verdict %d), not %v", closer, fwd.Dst, verdict, out.Dst)
		}
		h.expectCT(closer+", closed", f, reply, bpf.CTFlagReplied|bpf.CTFlagClosing, testTimeouts.Close)
	}

	u := flow("10.0.0.5:40000", "10.96.0.1:53", lb.ProtoUDP)
	_, out := h.send("lb_tc_ingress", u)
	h.expectCT("UDP", u, out.Reply(), 0, testTimeouts.Other)
}

// The two directions of a flow live one lifetime: a client silent while
// the backend keeps sending keeps its backend, a backend silent while the
// client keeps sending keeps its replies translated, and, for a flow with
// two entries, a reply entry the LRU took comes back with the client's
// next packet in a new second (a flow with one entry has no other entry
// to lose). Entries at the end of their life stand for the silence
// (their expiry set to the next second, as after a timeout's worth of
// it: set to now, a second that ended between the update and the
// packet, as it can on a loaded machine, left the entry dead and the
// test failing). A flow takes two entries when its client's port has a
// live flow to another frontend already (here to 10.96.0.2, whose one
// backend no flow of 10.96.0.1 has).
func TestTCConntrackBothDirectionsLiveOneLifetime(t *testing.T) {
	h := newDatapathOptions(t, dpConfig(), bpf.DatapathOptions{CTTimeouts: testTimeouts})
	var slots []uint32
	for id := uint32(1); id <= 10; id++ {
		h.backend(id, fmt.Sprintf("10.1.0.%d:8080/TCP", id), lb.BackendActive)
		slots = append(slots, id)
	}
	h.frontend(testFrontend{addr: "10.96.0.1:80/TCP", id: 1, slots: slots})
	h.backend(11, "10.1.0.11:8080/TCP", lb.BackendActive)
	h.frontend(testFrontend{addr: "10.96.0.2:80/TCP", id: 2, slots: []uint32{11}})
	ageBoth := func(f, reply tuple) {
		for _, d := range []tuple{f, reply} {
			k, v, ok := h.ctEntry(d)
			if !ok {
				t.Fatalf("no entry for %v", d)
			}
			v.Expires = monotonicSeconds(t) + 1
			h.check(h.maps.Conntrack.Update(k, v))
		}
	}
	for _, two := range []bool{false, true} {
		for i := range 50 {
			port := 40000 + i
			if two {
				port += 1000
				h.sendTCP("lb_tc_ingress", flow(fmt.Sprintf("10.0.0.5:%d", port), "10.96.0.2:80", lb.ProtoTCP), "S")
			}
			f := flow(fmt.Sprintf("10.0.0.5:%d", port), "10.96.0.1:80", lb.ProtoTCP)
			_, out := h.sendTCP("lb_tc_ingress", f, "S")
			reply := out.Reply()
			h.sendTCP("lb_tc_egress", reply, "SA")
			if k, _, _ := h.ctEntry(f); (k.Kind == bpf.CTPacket) != two {
				t.Fatalf("flow %d (two entries %v) has an entry of kind %d", i, two, k.Kind)
			}

			ageBoth(f, reply)
			h.sendTCP("lb_tc_egress", reply, "A") // the backend talks, the client is silent
			if v, _ := h.ct(f); v.Expires < monotonicSeconds(t)+uint32(testTimeouts.TCP/time.Second)-1 {
				t.Fatalf("flow %d: the backend's packet left the client's entry to expire at %d", i, v.Expires)
			}
			ageBoth(f, reply)
			h.sendTCP("lb_tc_ingress", f, "A") // the client talks, the backend is silent
			if v, _ := h.ct(reply); v.Expires < monotonicSeconds(t)+uint32(testTimeouts.TCP/time.Second)-1 {
				t.Fatalf("flow %d: the client's packet left the reply entry to expire at %d", i, v.Expires)
			}
			if !two {
				continue
			}

			h.check(h.maps.Conntrack.Delete(bpf.NewCTKey(reply.Src, reply.Dst, uint8(reply.Proto))))
			ageBoth(f, f) // the forward entry only: its reply entry is gone
			if _, again := h.sendTCP("lb_tc_ingress", f, "A"); again.Dst != out.Dst {
				t.Fatalf("flow %d went to %v, then %v", i, out.Dst, again.Dst)
			}
			if verdict, back := h.sendTCP("lb_tc_egress", reply, "A"); verdict != actOK || back != f.Reply() {
				t.Fatalf("flow %d: after its reply entry was lost, the reply %v became %v (verdict %d)", i, reply, back, verdict)
			}
		}
	}
}

// One client address and port to two frontends that share a backend:
// the backend's replies to both would look the same, so the second flow,
// with no other backend to take, is dropped and counted (ct-collision),
// and the first flow's replies stay translated to its own frontend
// rather than the second's. The client's flows from other ports go
// through, and a frontend with another backend gives the flow that one.
func TestTCRepliesOfTwoFrontendsNeverCollide(t *testing.T) {
	h := newDatapath(t, dpConfig())
	h.backend(1, "10.1.0.1:8080/TCP", lb.BackendActive)
	h.frontend(testFrontend{addr: "10.96.0.1:80/TCP", id: 1, slots: []uint32{1}})
	h.frontend(testFrontend{addr: "10.96.0.2:80/TCP", id: 2, slots: []uint32{1}})
	first := flow("10.0.0.5:40000", "10.96.0.1:80", lb.ProtoTCP)
	out := h.balance(first)
	if verdict, _ := h.send("lb_tc_ingress", flow("10.0.0.5:40000", "10.96.0.2:80", lb.ProtoTCP)); verdict != actShot {
		t.Errorf("the second flow from 10.0.0.5:40000 to the shared backend passed (verdict %d)", verdict)
	}
	if n := h.drops(2, bpf.DropCTCollision); n != 1 {
		t.Errorf("%d ct-collision drops for the second frontend, want 1", n)
	}
	if verdict, back := h.send("lb_tc_egress", out.Reply()); verdict != actOK || back != first.Reply() {
		t.Errorf("the first flow's reply %v became %v (verdict %d), want %v", out.Reply(), back, verdict, first.Reply())
	}
	other := flow("10.0.0.5:40001", "10.96.0.2:80", lb.ProtoTCP)
	if got := h.balance(other); got.Dst != out.Dst {
		t.Errorf("a flow from another port went to %v", got.Dst)
	}

	// A frontend with another backend to offer: the flow the selection
	// placed on the shared backend takes a random slot instead (here the
	// Maglev table names the shared backend alone, the one slot another).
	h.backend(2, "10.1.0.2:8080/TCP", lb.BackendActive)
	h.frontend(testFrontend{addr: "10.96.0.3:80/TCP", id: 3, maglev: true, slots: []uint32{2}, table: slices.Repeat([]uint32{1}, 251)})
	third := flow("10.0.0.5:40000", "10.96.0.3:80", lb.ProtoTCP)
	if got := h.balance(third); got.Dst != netip.MustParseAddrPort("10.1.0.2:8080") {
		t.Errorf("the flow whose hash named the shared backend went to %v, not the other backend", got.Dst)
	}
	if verdict, back := h.send("lb_tc_egress", out.Reply()); verdict != actOK || back != first.Reply() {
		t.Errorf("after the third flow, the first flow's reply %v became %v (verdict %d)", out.Reply(), back, verdict)
	}
}
