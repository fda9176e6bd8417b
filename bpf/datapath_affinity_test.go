package bpf_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// A pin is honoured only while its backend takes new flows for the
// frontend, that is while it sits in one of the slots 1..count, whatever
// its state in lb_backends (a backend that another frontend still uses
// stays active there): a pinned client whose backend moved to standby, or
// out of the slots (hidden by a route or a redirect), has its new flows
// balanced and its pin replaced; a backend that only moved to other slots
// keeps its pins, and the pin's slot hint follows it. Both algorithms.
func TestTCAffinityFollowsTheNewFlowSlots(t *testing.T) {
	type change struct {
		name           string
		slots, standby []uint32
		honoured       bool
	}
	for _, maglev := range []bool{false, true} {
		for _, c := range []change{
			{name: "standby", slots: []uint32{1, 3, 4}, standby: []uint32{2}},
			{name: "in no slot", slots: []uint32{1, 3, 4}},
			{name: "other slots", slots: []uint32{4, 3, 1, 1, 2, 2}, honoured: true},
		} {
			t.Run(fmt.Sprintf("%s/maglev=%v", c.name, maglev), func(t *testing.T) {
				h := newDatapath(t, dpConfig())
				for id := uint32(1); id <= 4; id++ {
					h.backend(id, fmt.Sprintf("10.1.0.%d:8080/TCP", id), lb.BackendActive)
				}
				fe := testFrontend{addr: "10.96.0.1:80/TCP", id: 1, affinity: 60, maglev: maglev, slots: []uint32{1, 2, 3, 4}}
				h.frontend(fe)
				key := bpf.AffinityKey{Client: netip.MustParseAddr("10.0.0.5").As16(), RevNatID: 1}
				h.check(h.maps.Affinity.Update(key, bpf.AffinityValue{BackendID: 2, LastUsed: monotonicSeconds(t)}))
				newFlow := func(port int) uint32 {
					return h.backendAt(h.balance(flow(fmt.Sprintf("10.0.0.5:%d", port), "10.96.0.1:80", lb.ProtoTCP)).Dst)
				}
				if got := newFlow(40000); got != 2 {
					t.Fatalf("before the change, a new flow went to backend %d, not 2 where the client is pinned", got)
				}

				fe.slots, fe.standby, fe.table = c.slots, c.standby, nil
				if maglev {
					h.check(h.maps.Maglev.Delete(1))
				}
				h.frontend(fe)
				var to []uint32
				for port := 41000; port < 41020; port++ {
					to = append(to, newFlow(port))
				}
				v, ok, err := h.maps.Affinity.Lookup(key)
				h.check(err)
				for _, got := range to {
					switch {
					case c.honoured && got != 2:
						t.Fatalf("backend 2 still takes new flows, yet the pinned client's new flows went to %v", to)
					case !c.honoured && got == 2:
						t.Fatalf("backend 2 takes no new flows, yet the pinned client's new flows went to %v", to)
					case got != to[0]:
						t.Fatalf("the client's new flows went to %v: the new pin did not hold", to)
					}
				}
				if !ok || v.BackendID != to[0] {
					t.Errorf("lb_affinity has %+v (%v), want the client pinned to %d", v, ok, to[0])
				}
				if c.honoured && (v.Slot == 0 || c.slots[v.Slot-1] != 2) {
					t.Errorf("the pin's slot hint is %d, not a slot of backend 2 in %v", v.Slot, c.slots)
				}
			})
		}
	}
}

// Socket load balancing follows the same rule: a network namespace pinned
// to a backend that left the frontend's new-flow slots (to standby, still
// active in lb_backends) has its connections balanced anew, all to the
// one backend of its new pin.
func TestSocketLBAffinityFollowsTheNewFlowSlots(t *testing.T) {
	s := newSockSetup(t)
	fe := testFrontend{addr: "10.96.0.10:80/TCP", id: 1, slots: []uint32{1, 2, 3}, affinity: 60}
	s.frontend(fe)
	first := bpftest.RunClient(t, s.cg, s.ns, "tcp 10.96.0.10:80 1")[0]
	var pinned uint32
	s.check(s.maps.Affinity.Iterate(func(_ bpf.AffinityKey, v bpf.AffinityValue) bool { pinned = v.BackendID; return true }))
	if pinned == 0 {
		t.Fatalf("the connection to %s left no pin", first)
	}

	fe.slots, fe.standby = nil, []uint32{pinned}
	for id := uint32(1); id <= 3; id++ {
		if id != pinned {
			fe.slots = append(fe.slots, id)
		}
	}
	s.frontend(fe)
	lines := bpftest.RunClient(t, s.cg, s.ns, "tcp 10.96.0.10:80 20")
	for _, l := range lines {
		if l == first || l != lines[0] {
			t.Fatalf("after backend %d (%s) went to standby, the pinned namespace's connections went to %v", pinned, first, lines)
		}
	}
}
