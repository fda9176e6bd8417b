package bpf_test

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// tcCase is one frontend of TestTCBalancesEveryKindOfFrontend.
type tcCase struct {
	typ    lb.SVCType
	v6     bool
	proto  lb.Protocol
	maglev bool
}

func (c tcCase) String() string {
	fam, alg := "IPv4", "random"
	if c.v6 {
		fam = "IPv6"
	}
	if c.maglev {
		alg = "maglev"
	}
	return fmt.Sprintf("%s/%s/%s/%s", c.typ, fam, c.proto, alg)
}

// Every type of frontend, both families, both protocols and both
// algorithms: a new flow goes to a backend of the frontend's slots (with
// Maglev, exactly the one at the flow hash's slot), the reply comes back
// from the frontend on ingress and on egress, every checksum is right, and
// the flow, its packets and bytes are counted for the frontend and
// backend.
func TestTCBalancesEveryKindOfFrontend(t *testing.T) {
	h := newDatapath(t, dpConfig())
	var cases []tcCase
	for _, typ := range []lb.SVCType{lb.SVCTypeClusterIP, lb.SVCTypeNodePort, lb.SVCTypeLoadBalancer, lb.SVCTypeExternalIP, lb.SVCTypeHostPort} {
		for _, v6 := range []bool{false, true} {
			for _, proto := range []lb.Protocol{lb.ProtoTCP, lb.ProtoUDP} {
				for _, maglev := range []bool{false, true} {
					cases = append(cases, tcCase{typ, v6, proto, maglev})
				}
			}
		}
	}
	backendID := uint32(0)
	for i, c := range cases {
		id := uint32(i + 1)
		addr := func(v4, v6 string, port int) string {
			if c.v6 {
				return fmt.Sprintf("[%s]:%d/%s", fmt.Sprintf(v6, i), port, c.proto)
			}
			return fmt.Sprintf("%s:%d/%s", fmt.Sprintf(v4, i), port, c.proto)
		}
		var slots []uint32
		for j := range 3 {
			backendID++
			h.backend(backendID, addr(fmt.Sprintf("10.1.%%d.%d", j+1), fmt.Sprintf("fd00:1:%%d::%d", j+1), 8080+j), lb.BackendActive)
			slots = append(slots, backendID)
		}
		slots = append(slots, slots[0]) // the first backend weighs twice
		fe := addr("172.16.0.%d", "fd00:ffff::%d", 80)
		h.frontend(testFrontend{addr: fe, typ: c.typ, id: id, maglev: c.maglev, slots: slots})

		t.Run(c.String(), func(t *testing.T) {
			h.t = t
			frontend := lb.MustParseL3n4Addr(fe)
			client := "192.0.2.7"
			if c.v6 {
				client = "[2001:db8::7]"
			}
			seen := map[uint32]bool{}
			for port := 40000; port < 40020; port++ {
				f := tuple{Src: netip.MustParseAddrPort(fmt.Sprintf("%s:%d", client, port)), Dst: frontend.AddrPort(), Proto: c.proto}
				out := h.balance(f)
				if out.Src != f.Src || out.Proto != f.Proto {
					t.Fatalf("%v became %v: only the destination may change", f, out)
				}
				chosen := h.backendAt(out.Dst)
				if !slices.Contains(slots, chosen) {
					t.Fatalf("%v went to backend %d, not one of the slots %v", f, chosen, slots)
				}
				if c.maglev {
					seed, err := h.maps.Seed()
					h.check(err)
					want := slots[int(seed.FlowHash(f.Src, frontend)%251)%len(slots)]
					if chosen != want {
						t.Fatalf("%v went to backend %d; the flow hash's slot holds %d", f, chosen, want)
					}
				}
				seen[chosen] = true
				for _, prog := range []string{"lb_tc_egress", "lb_tc_ingress"} {
					verdict, back := h.send(prog, out.Reply())
					if verdict != actOK || back != f.Reply() {
						t.Fatalf("%s: the reply %v became %v (verdict %d), want %v", prog, out.Reply(), back, verdict, f.Reply())
					}
				}
			}
			if len(seen) < 2 {
				t.Errorf("20 flows all went to %v", seen)
			}
			var flows, packets, bytes uint64
			for _, b := range slots[:3] {
				c := h.counter(id, b)
				flows, packets, bytes = flows+c.Flows, packets+c.Packets, bytes+c.Bytes
			}
			size := uint64(len(packet(t, tuple{Src: netip.MustParseAddrPort(client + ":1"), Dst: frontend.AddrPort(), Proto: c.proto}, 32)))
			if flows != 20 || packets != 60 || bytes != 60*size {
				t.Errorf("counted %d flows, %d packets, %d bytes; want 20, 60 (one each way, twice back), %d", flows, packets, bytes, 60*size)
			}
		})
	}
}

// A flow keeps its backend, by conntrack, when the frontend's slots and
// Maglev table change to other backends; new flows follow the change.
func TestTCEstablishedFlowKeepsItsBackendWhenSlotsChange(t *testing.T) {
	for _, maglev := range []bool{false, true} {
		t.Run(fmt.Sprintf("maglev=%v", maglev), func(t *testing.T) {
			h := newDatapath(t, dpConfig())
			h.backend(1, "10.1.0.1:8080/TCP", lb.BackendActive)
			h.backend(2, "10.1.0.2:8080/TCP", lb.BackendActive)
			fe := testFrontend{addr: "10.96.0.1:80/TCP", id: 1, maglev: maglev, slots: []uint32{1}}
			h.frontend(fe)
			established := flow("10.0.0.5:40000", "10.96.0.1:80", lb.ProtoTCP)
			if got := h.balance(established).Dst; got != netip.MustParseAddrPort("10.1.0.1:8080") {
				t.Fatalf("first packet went to %s", got)
			}
			fe.slots = []uint32{2}
			h.frontend(fe)
			for range 5 {
				if got := h.balance(established).Dst; got != netip.MustParseAddrPort("10.1.0.1:8080") {
					t.Fatalf("after the change, the established flow went to %s", got)
				}
			}
			if got := h.balance(flow("10.0.0.5:40001", "10.96.0.1:80", lb.ProtoTCP)).Dst; got != netip.MustParseAddrPort("10.1.0.2:8080") {
				t.Fatalf("a new flow went to %s, not the only backend left", got)
			}
			if c := h.counter(1, 1); c.Flows != 1 || c.Packets != 6 {
				t.Errorf("backend 1 counted %+v, want 1 flow, 6 packets", c)
			}
		})
	}
}

// A backend only in standby slots (terminating) keeps carrying its
// established flows, and takes no new ones.
func TestTCTerminatingBackendKeepsItsFlowsButTakesNoNewOnes(t *testing.T) {
	h := newDatapath(t, dpConfig())
	h.backend(1, "10.1.0.1:8080/UDP", lb.BackendActive)
	h.backend(2, "10.1.0.2:8080/UDP", lb.BackendActive)
	fe := testFrontend{addr: "10.96.0.1:53/UDP", id: 1, slots: []uint32{1, 2}}
	h.frontend(fe)
	var onOne []tuple
	for port := 40000; len(onOne) < 5; port++ {
		f := flow(fmt.Sprintf("10.0.0.5:%d", port), "10.96.0.1:53", lb.ProtoUDP)
		if h.balance(f).Dst == netip.MustParseAddrPort("10.1.0.1:8080") {
			onOne = append(onOne, f)
		}
	}
	h.backend(1, "10.1.0.1:8080/UDP", lb.BackendTerminating)
	fe.slots, fe.standby = []uint32{2}, []uint32{1}
	h.frontend(fe)
	if err := h.maps.Services.Delete(bpf.NewServiceKey(lb.MustParseL3n4Addr(fe.addr), 3)); err != nil {
		t.Fatal(err)
	}
	for _, f := range onOne {
		if got := h.balance(f).Dst; got != netip.MustParseAddrPort("10.1.0.1:8080") {
			t.Fatalf("%v left its terminating backend for %s", f, got)
		}
	}
	for port := 50000; port < 50100; port++ {
		if got := h.balance(flow(fmt.Sprintf("10.0.0.5:%d", port), "10.96.0.1:53", lb.ProtoUDP)).Dst; got != netip.MustParseAddrPort("10.1.0.2:8080") {
			t.Fatalf("a new flow went to %s, the terminating backend", got)
		}
	}
}

// A flow whose backend was deleted from lb_backends is balanced anew
// rather than sent nowhere.
func TestTCFlowWhoseBackendIsGoneIsBalancedAnew(t *testing.T) {
	h := newDatapath(t, dpConfig())
	h.backend(1, "10.1.0.1:8080/TCP", lb.BackendActive)
	fe := testFrontend{addr: "10.96.0.1:80/TCP", id: 1, slots: []uint32{1}}
	h.frontend(fe)
	f := flow("10.0.0.5:40000", "10.96.0.1:80", lb.ProtoTCP)
	h.balance(f)
	h.backend(2, "10.1.0.2:8080/TCP", lb.BackendActive)
	fe.slots = []uint32{2}
	h.frontend(fe)
	h.check(h.maps.Backends.Delete(1))
	if got := h.balance(f).Dst; got != netip.MustParseAddrPort("10.1.0.2:8080") {
		t.Fatalf("the flow went to %s after its backend was deleted", got)
	}
	if c := h.counter(1, 2); c.Flows != 1 {
		t.Errorf("the rebalanced flow was counted as %d new flows on its new backend, want 1", c.Flows)
	}
}

// An external frontend's internal twin (the service's traffic policies
// differ) serves traffic from local workloads (lb_tc_workload), the
// external one traffic from outside (lb_tc_ingress); without a twin,
// workloads use the external entry.
func TestTCWorkloadTrafficUsesTheInternalScope(t *testing.T) {
	h := newDatapath(t, dpConfig())
	h.backend(1, "10.1.0.1:8080/TCP", lb.BackendActive) // on this node
	h.backend(2, "10.1.0.2:8080/TCP", lb.BackendActive) // elsewhere
	h.frontend(testFrontend{addr: "192.0.2.1:30080/TCP", typ: lb.SVCTypeNodePort, id: 1, slots: []uint32{1}})
	h.frontend(testFrontend{addr: "192.0.2.1:30080/TCP/i", typ: lb.SVCTypeNodePort, id: 2, slots: []uint32{2}})
	h.frontend(testFrontend{addr: "10.96.0.1:80/TCP", id: 3, slots: []uint32{2}})
	for i := range 10 {
		f := flow(fmt.Sprintf("10.0.0.5:%d", 40000+i), "192.0.2.1:30080", lb.ProtoTCP)
		if _, got := h.send("lb_tc_ingress", f); got.Dst != netip.MustParseAddrPort("10.1.0.1:8080") {
			t.Fatalf("from outside, %v went to %s, not the external scope's backend", f, got.Dst)
		}
		f.Src = netip.MustParseAddrPort(fmt.Sprintf("10.0.0.6:%d", 40000+i))
		if _, got := h.send("lb_tc_workload", f); got.Dst != netip.MustParseAddrPort("10.1.0.2:8080") {
			t.Fatalf("from a workload, %v went to %s, not the internal scope's backend", f, got.Dst)
		}
		f = flow(fmt.Sprintf("10.0.0.6:%d", 50000+i), "10.96.0.1:80", lb.ProtoTCP)
		if _, got := h.send("lb_tc_workload", f); got.Dst != netip.MustParseAddrPort("10.1.0.2:8080") {
			t.Fatalf("from a workload, the ClusterIP flow %v went to %s", f, got.Dst)
		}
	}
}

// A frontend with source ranges balances its clients and drops, and
// counts, everyone else's packets.
func TestTCSourceRangesAdmitOnlyTheirClients(t *testing.T) {
	h := newDatapath(t, dpConfig())
	h.backend(1, "10.1.0.1:8080/TCP", lb.BackendActive)
	h.backend(2, "[fd00::1]:8080/TCP", lb.BackendActive)
	h.frontend(testFrontend{addr: "203.0.113.10:443/TCP", typ: lb.SVCTypeLoadBalancer, id: 1, slots: []uint32{1}, ranges: []string{"198.51.100.0/24"}})
	h.frontend(testFrontend{addr: "[2001:db8::10]:443/TCP", typ: lb.SVCTypeLoadBalancer, id: 2, slots: []uint32{2}, ranges: []string{"2001:db8:1::/48"}})
	for _, c := range []struct {
		flow    tuple
		allowed bool
	}{
		{flow("198.51.100.9:40000", "203.0.113.10:443", lb.ProtoTCP), true},
		{flow("198.51.101.9:40000", "203.0.113.10:443", lb.ProtoTCP), false},
		{flow("[2001:db8:1::9]:40000", "[2001:db8::10]:443", lb.ProtoTCP), true},
		{flow("[2001:db8:2::9]:40000", "[2001:db8::10]:443", lb.ProtoTCP), false},
	} {
		verdict, out := h.send("lb_tc_ingress", c.flow)
		switch {
		case c.allowed && (verdict != actOK || out.Dst == c.flow.Dst):
			t.Errorf("%v: verdict %d, to %s; want it balanced", c.flow, verdict, out.Dst)
		case !c.allowed && verdict != actShot:
			t.Errorf("%v: verdict %d, want it dropped", c.flow, verdict)
		}
	}
	for id := uint32(1); id <= 2; id++ {
		if n := h.drops(id, bpf.DropSourceRange); n != 1 {
			t.Errorf("frontend %d: %d source-range drops, want 1", id, n)
		}
	}
}

// New flows to a frontend no backend takes (count 0) are dropped and
// counted, as are those whose Maglev table is missing or whose backend is
// of the other IP family.
func TestTCFlowsWithNowhereToGoAreDroppedAndCounted(t *testing.T) {
	h := newDatapath(t, dpConfig())
	h.backend(1, "[fd00::1]:8080/TCP", lb.BackendActive)
	h.frontend(testFrontend{addr: "10.96.0.1:80/TCP", id: 1})
	h.frontend(testFrontend{addr: "10.96.0.2:80/TCP", id: 2, maglev: true, slots: []uint32{1}, table: nil})
	h.check(h.maps.Maglev.Delete(2))
	h.frontend(testFrontend{addr: "10.96.0.3:80/TCP", id: 3, slots: []uint32{1}})
	for _, c := range []struct {
		dst    string
		id     uint32
		reason uint32
	}{
		{"10.96.0.1:80", 1, bpf.DropNoBackend},
		{"10.96.0.2:80", 2, bpf.DropMissingEntry},
		{"10.96.0.3:80", 3, bpf.DropUnsupported},
	} {
		for i := range 3 {
			if verdict, _ := h.send("lb_tc_ingress", flow(fmt.Sprintf("10.0.0.5:%d", 40000+i), c.dst, lb.ProtoTCP)); verdict != actShot {
				t.Errorf("%s: verdict %d, want the packet dropped", c.dst, verdict)
			}
		}
		if n := h.drops(c.id, c.reason); n != 3 {
			t.Errorf("%s: %d drops for %s, want 3", c.dst, n, bpf.DropReasons[c.reason])
		}
	}
}

// Session affinity sends a client's new flows to the backend it is pinned
// to while the pin is younger than the timeout; an expired pin, or one to
// a backend that takes no new flows, is replaced by a new choice.
func TestTCAffinityPinsAClientUntilItExpires(t *testing.T) {
	h := newDatapath(t, dpConfig())
	var slots []uint32
	for id := uint32(1); id <= 8; id++ {
		h.backend(id, fmt.Sprintf("10.1.0.%d:8080/TCP", id), lb.BackendActive)
		slots = append(slots, id)
	}
	h.frontend(testFrontend{addr: "10.96.0.1:80/TCP", id: 1, affinity: 60, slots: slots})
	client := netip.MustParseAddr("10.0.0.5")
	key := bpf.AffinityKey{Client: client.As16(), RevNatID: 1}
	first := h.balance(flow("10.0.0.5:40000", "10.96.0.1:80", lb.ProtoTCP)).Dst
	for port := 40001; port < 40020; port++ {
		if got := h.balance(flow(fmt.Sprintf("10.0.0.5:%d", port), "10.96.0.1:80", lb.ProtoTCP)).Dst; got != first {
			t.Fatalf("new flow from port %d went to %s, not to %s, where the client is pinned", port, got, first)
		}
	}
	pinned, ok, err := h.maps.Affinity.Lookup(key)
	if err != nil || !ok || pinned.BackendID != h.backendAt(first) {
		t.Fatalf("lb_affinity has %+v (%v, %v), want the client pinned to %s", pinned, ok, err, first)
	}

	now := monotonicSeconds(t)
	expired := map[uint32]bool{}
	for port := 41000; port < 41040; port++ {
		h.check(h.maps.Affinity.Update(key, bpf.AffinityValue{BackendID: 3, LastUsed: now - 61}))
		got := h.backendAt(h.balance(flow(fmt.Sprintf("10.0.0.5:%d", port), "10.96.0.1:80", lb.ProtoTCP)).Dst)
		expired[got] = true
		if v, _, _ := h.maps.Affinity.Lookup(key); v.BackendID != got || v.LastUsed+1 < now { // the coarse clock may lag a tick
			t.Fatalf("after an expired pin, lb_affinity has %+v, want a fresh pin to %d", v, got)
		}
	}
	if len(expired) < 2 {
		t.Errorf("with the pin expired, 40 new flows all went to %v", expired)
	}

	h.backend(3, "10.1.0.3:8080/TCP", lb.BackendTerminating)
	h.frontend(testFrontend{addr: "10.96.0.1:80/TCP", id: 1, affinity: 60,
		slots: slices.DeleteFunc(slices.Clone(slots), func(id uint32) bool { return id == 3 }), standby: []uint32{3}})
	for port := 42000; port < 42040; port++ {
		h.check(h.maps.Affinity.Update(key, bpf.AffinityValue{BackendID: 3, LastUsed: now}))
		if got := h.backendAt(h.balance(flow(fmt.Sprintf("10.0.0.5:%d", port), "10.96.0.1:80", lb.ProtoTCP)).Dst); got == 3 {
			t.Fatal("a new flow went to the terminating backend the client was pinned to")
		}
	}
}

// Packets the datapath does not balance pass untouched: to no frontend,
// to a frontend's address on another port, IPv4 fragments to no frontend
// (a frontend's are translated: TestTCTranslatesEveryFragmentOfAFlow),
// non-IP.
func TestTCLeavesOtherTrafficAlone(t *testing.T) {
	h := newDatapath(t, dpConfig())
	h.backend(1, "10.1.0.1:8080/TCP", lb.BackendActive)
	h.frontend(testFrontend{addr: "10.96.0.1:80/TCP", id: 1, slots: []uint32{1}})
	fragment := packet(t, flow("10.0.0.5:40000", "10.96.0.2:80", lb.ProtoTCP), 32)
	fragment[14+6] |= 0x20 // more fragments
	arp := append(make([]byte, 12), 0x08, 0x06)
	arp = append(arp, make([]byte, 28)...)
	for name, pkt := range map[string][]byte{
		"no frontend":    packet(t, flow("10.0.0.5:40000", "10.96.0.2:80", lb.ProtoTCP), 32),
		"another port":   packet(t, flow("10.0.0.5:40000", "10.96.0.1:81", lb.ProtoTCP), 32),
		"other protocol": packet(t, flow("10.0.0.5:40000", "10.96.0.1:80", lb.ProtoUDP), 32),
		"fragment":       fragment,
		"ARP":            arp,
	} {
		for _, prog := range []string{"lb_tc_ingress", "lb_tc_workload", "lb_tc_egress"} {
			verdict, out := h.run(prog, pkt)
			if verdict != actOK || string(out) != string(pkt) {
				t.Errorf("%s, %s: verdict %d, packet changed: %v", name, prog, verdict, string(out) != string(pkt))
			}
		}
	}
}

// An IPv4 UDP datagram without a checksum (0) keeps none after DNAT.
func TestTCUDPWithoutChecksumKeepsNone(t *testing.T) {
	h := newDatapath(t, dpConfig())
	h.backend(1, "10.1.0.1:5353/UDP", lb.BackendActive)
	h.frontend(testFrontend{addr: "10.96.0.10:53/UDP", id: 1, slots: []uint32{1}})
	pkt := packet(t, flow("10.0.0.5:40000", "10.96.0.10:53", lb.ProtoUDP), 32)
	pkt[14+20+6], pkt[14+20+7] = 0, 0
	verdict, out := h.run("lb_tc_ingress", pkt)
	if got := decode(t, out); verdict != actOK || got.Dst != netip.MustParseAddrPort("10.1.0.1:5353") {
		t.Fatalf("verdict %d, to %s", verdict, got.Dst)
	}
	if out[14+20+6] != 0 || out[14+20+7] != 0 {
		t.Errorf("the UDP checksum became %#x%02x, want it left 0", out[14+20+6], out[14+20+7])
	}
}

// lb_backends and lb_rev_nat are dense ID maps: an ID lives in slot ID %
// max_entries. A flow whose conntrack entry names a backend or frontend
// ID that was released, and whose slot now holds a newer ID, treats its
// ID as gone: the forward direction is balanced anew rather than sent to
// the slot's new backend, and a reply is not rewritten to the slot's new
// frontend.
func TestTCStaleIDWhoseSlotWasReusedIsGone(t *testing.T) {
	cfg := dpConfig()
	cfg.LBBackendsMax, cfg.LBRevNatMax = 8, 8
	h := newDatapath(t, cfg)
	h.backend(1, "10.1.0.1:8080/TCP", lb.BackendActive)
	fe := testFrontend{addr: "10.96.0.1:80/TCP", id: 1, slots: []uint32{1}}
	h.frontend(fe)
	f := flow("10.0.0.5:40000", "10.96.0.1:80", lb.ProtoTCP)
	out := h.balance(f)
	if out.Dst != netip.MustParseAddrPort("10.1.0.1:8080") {
		t.Fatalf("first packet went to %s", out.Dst)
	}
	if _, back := h.send("lb_tc_ingress", out.Reply()); back != f.Reply() {
		t.Fatalf("the reply became %v, want %v", back, f.Reply())
	}

	// Backend 1 goes; backend 9 takes its slot (1 of 8) for another
	// frontend, and backend 2 replaces it in this one.
	h.check(h.maps.Backends.Delete(1))
	h.backend(9, "10.1.0.9:8080/TCP", lb.BackendActive)
	h.backend(2, "10.1.0.2:8080/TCP", lb.BackendActive)
	fe.slots = []uint32{2}
	h.frontend(fe)
	if got := h.balance(f).Dst; got != netip.MustParseAddrPort("10.1.0.2:8080") {
		t.Fatalf("the flow of released backend ID 1 went to %s, want it balanced anew to 10.1.0.2:8080 (backend 9 holds slot 1)", got)
	}

	// Frontend 1 goes; frontend 9 takes its lb_rev_nat slot.
	h.check(h.maps.RevNat.Delete(1))
	h.frontend(testFrontend{addr: "172.16.0.9:80/TCP", id: 9, slots: []uint32{9}})
	verdict, back := h.send("lb_tc_ingress", out.Reply())
	if verdict != actOK || back != out.Reply() {
		t.Fatalf("a reply of released frontend ID 1 became %v (verdict %d), want it untouched %v (frontend 9 holds slot 1)", back, verdict, out.Reply())
	}
}
