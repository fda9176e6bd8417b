package bpf_test

import (
	"net/netip"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// ctKind returns the kind of the entry that packets of f find (bpf.CTClient:
// their flow's one entry; bpf.CTPacket: one of its two).
func (h *dpHarness) ctKind(f tuple) uint8 {
	h.t.Helper()
	k, _, ok := h.ctEntry(f)
	if !ok {
		h.t.Fatalf("no entry for %v", f)
	}
	return k.Kind
}

// A flow takes one entry, keyed by its client; a client port that
// already has a live flow to another frontend (one UDP socket talking to
// two services) gives its second flow two entries. Both flows keep their
// own backends and their replies their own frontends, also after the
// first flow's entry expired: the collector keeps it (dead) while the
// second flow's entries live, for the datapath finds those only while
// the client's key holds an entry.
func TestTCSharedClientPortGivesTheSecondFlowTwoEntries(t *testing.T) {
	h := newDatapath(t, dpConfig())
	h.backend(1, "10.1.0.1:53/UDP", lb.BackendActive)
	h.backend(2, "10.1.0.2:53/UDP", lb.BackendActive)
	h.frontend(testFrontend{addr: "10.96.0.10:53/UDP", id: 1, slots: []uint32{1}})
	h.frontend(testFrontend{addr: "10.96.0.11:53/UDP", id: 2, slots: []uint32{2}})
	first := flow("10.0.0.5:40000", "10.96.0.10:53", lb.ProtoUDP)
	second := flow("10.0.0.5:40000", "10.96.0.11:53", lb.ProtoUDP)
	to := []netip.AddrPort{netip.MustParseAddrPort("10.1.0.1:53"), netip.MustParseAddrPort("10.1.0.2:53")}

	if got := h.balance(first).Dst; got != to[0] {
		t.Fatalf("the first flow went to %v", got)
	}
	if got := h.balance(second).Dst; got != to[1] {
		t.Fatalf("the second flow went to %v", got)
	}
	if k := h.ctKind(first); k != bpf.CTClient {
		t.Errorf("the first flow's entry is of kind %d, want its one entry", k)
	}
	if k := h.ctKind(second); k != bpf.CTPacket {
		t.Errorf("the second flow's entry is of kind %d, want two entries", k)
	}
	check := func(when string, to []netip.AddrPort, flows ...tuple) {
		t.Helper()
		for i, f := range flows {
			if got := h.balance(f).Dst; got != to[i] {
				t.Errorf("%s: %v went to %v, want %v", when, f, got, to[i])
			}
			reply := flow(to[i].String(), f.Src.String(), lb.ProtoUDP)
			if verdict, back := h.send("lb_tc_egress", reply); verdict != actOK || back != f.Reply() {
				t.Errorf("%s: the reply %v became %v (verdict %d), want %v", when, reply, back, verdict, f.Reply())
			}
		}
	}
	check("both live", to, first, second)

	// The first flow's entry expires; the collector keeps it.
	k := bpf.NewCTClientKey(first.Src, uint8(first.Proto))
	v, ok, err := h.maps.Conntrack.Lookup(k)
	if err != nil || !ok {
		t.Fatalf("no entry under the client's key (%v)", err)
	}
	v.Expires = monotonicSeconds(t) - 10
	h.check(h.maps.Conntrack.Update(k, v))
	c, err := bpf.CollectConntrack(h.maps, h.maps.Conntrack)
	h.check(err)
	if c.Expired != 0 {
		t.Errorf("the collector deleted %d entries, want 0: the expired one holds the key of a client with two-entry flows", c.Expired)
	}
	check("the first flow's entry expired", to[1:], second)
}

// The reply-collision rule holds between a flow with two entries and a
// new flow with one: a client port whose flow to one frontend has two
// entries (to backend 2) cannot open a flow to another frontend whose
// one backend is backend 2 too, also once the flow that held the
// client's key is gone; the new flow is dropped and counted.
func TestTCRepliesOfAFlowWithOneEntryNeverCollideWithTwo(t *testing.T) {
	h := newDatapath(t, dpConfig())
	h.backend(1, "10.1.0.1:8080/TCP", lb.BackendActive)
	h.backend(2, "10.1.0.2:8080/TCP", lb.BackendActive)
	h.frontend(testFrontend{addr: "10.96.0.1:80/TCP", id: 1, slots: []uint32{1}})
	h.frontend(testFrontend{addr: "10.96.0.2:80/TCP", id: 2, slots: []uint32{2}})
	h.frontend(testFrontend{addr: "10.96.0.3:80/TCP", id: 3, slots: []uint32{2}})
	holder := flow("10.0.0.5:40000", "10.96.0.1:80", lb.ProtoTCP)
	paired := flow("10.0.0.5:40000", "10.96.0.2:80", lb.ProtoTCP)
	h.balance(holder)
	out := h.balance(paired)
	if k := h.ctKind(paired); k != bpf.CTPacket {
		t.Fatalf("the second flow's entry is of kind %d, want two entries", k)
	}
	// The flow that held the client's key ends: its entry is dead.
	k := bpf.NewCTClientKey(holder.Src, uint8(holder.Proto))
	v, _, err := h.maps.Conntrack.Lookup(k)
	h.check(err)
	v.Expires = monotonicSeconds(t) - 10
	h.check(h.maps.Conntrack.Update(k, v))

	if verdict, _ := h.send("lb_tc_ingress", flow("10.0.0.5:40000", "10.96.0.3:80", lb.ProtoTCP)); verdict != actShot {
		t.Errorf("a flow whose replies would be the two-entry flow's passed (verdict %d)", verdict)
	}
	if n := h.drops(3, bpf.DropCTCollision); n != 1 {
		t.Errorf("%d ct-collision drops for the third frontend, want 1", n)
	}
	if verdict, back := h.send("lb_tc_egress", out.Reply()); verdict != actOK || back != paired.Reply() {
		t.Errorf("the two-entry flow's reply %v became %v (verdict %d), want %v", out.Reply(), back, verdict, paired.Reply())
	}
}

// Upgrade: the flows an older datapath wrote into a pinned lb_ct (two
// entries each, no entry under the client's key) keep their backend and
// their replies' translation under the new programs, which look for two
// entries only where the client's key holds one: loading the datapath
// marks those clients.
func TestTCFlowsOfAnOlderDatapathKeepTheirBackends(t *testing.T) {
	cfg := dpConfig()
	cfg.LBPinDir = bpftest.Config(t).LBPinDir
	maps := bpftest.KernelMaps(t, cfg)
	h := &dpHarness{t: t, maps: maps}
	h.backend(1, "10.1.0.1:8080/TCP", lb.BackendActive)
	h.backend(2, "10.1.0.2:8080/TCP", lb.BackendActive)
	// Backend 1 took the flow; the frontend now names backend 2 only, so
	// a flow balanced anew would go there.
	h.frontend(testFrontend{addr: "10.96.0.1:80/TCP", id: 1, slots: []uint32{2}})
	f := flow("10.0.0.5:40000", "10.96.0.1:80", lb.ProtoTCP)
	backend := netip.MustParseAddrPort("10.1.0.1:8080")
	expires := monotonicSeconds(t) + 600
	fwd := bpf.CTValue{BackendID: 1, RevNatID: 1, Expires: expires, Dir: bpf.CTForward, Flags: bpf.CTFlagReplied}
	reply := fwd
	reply.Dir = bpf.CTReply
	reply.Peer = f.Dst.Addr().As16()
	reply.PeerPort = [2]byte{byte(f.Dst.Port() >> 8), byte(f.Dst.Port())}
	h.check(maps.Conntrack.Update(bpf.NewCTKey(f.Src, f.Dst, uint8(f.Proto)), fwd))
	h.check(maps.Conntrack.Update(bpf.NewCTKey(backend, f.Src, uint8(f.Proto)), reply))

	d, err := bpf.LoadDatapath(maps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	h.dp = d
	if _, out := h.sendTCP("lb_tc_ingress", f, "A"); out.Dst != backend {
		t.Errorf("the older datapath's flow went to %v, want its backend %v", out.Dst, backend)
	}
	if verdict, back := h.sendTCP("lb_tc_egress", flow(backend.String(), f.Src.String(), lb.ProtoTCP), "A"); verdict != actOK || back != f.Reply() {
		t.Errorf("its reply became %v (verdict %d), want %v", back, verdict, f.Reply())
	}
	if v, ok, err := maps.Conntrack.Lookup(bpf.NewCTClientKey(f.Src, uint8(f.Proto))); err != nil || !ok || v.Dir != bpf.CTFlow || v.RevNatID != 0 {
		t.Errorf("under the client's key: %+v (found %v, %v), want a marker", v, ok, err)
	}
}
