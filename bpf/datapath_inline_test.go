package bpf_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// New flows reach every backend in proportion to its slots whether the
// slots live in the master entry (the first bpf.InlineSlots), in entries
// of their own, or both: at InlineSlots, InlineSlots+1 and
// 2*InlineSlots+3 slots, and with a backend whose two slots straddle the
// line.
func TestTCSpreadsNewFlowsOverInlineAndEntrySlotsAlike(t *testing.T) {
	k := bpf.InlineSlots
	oneEach := func(n int) []uint32 {
		var slots []uint32
		for id := uint32(1); id <= uint32(n); id++ {
			slots = append(slots, id)
		}
		return slots
	}
	straddling := oneEach(k - 1)
	straddling = append(straddling, uint32(k), uint32(k)) // slots k and k+1
	straddling = append(straddling, uint32(k+1))
	for _, slots := range [][]uint32{oneEach(k), oneEach(k + 1), oneEach(2*k + 3), straddling} {
		t.Run(fmt.Sprintf("%d slots", len(slots)), func(t *testing.T) {
			h := newDatapath(t, dpConfig())
			share := map[uint32]int{} // slots of each backend
			for _, id := range slots {
				if share[id] == 0 {
					h.backend(id, fmt.Sprintf("10.1.0.%d:8080/UDP", id), lb.BackendActive)
				}
				share[id]++
			}
			h.frontend(testFrontend{addr: "10.96.0.1:53/UDP", id: 1, slots: slots})
			// 150 flows a slot: a backend's count is within 0.5x..1.5x
			// of its share by more than six standard deviations.
			n := 150 * len(slots)
			got := map[uint32]int{}
			for i := range n {
				f := flow(fmt.Sprintf("10.0.%d.%d:%d", i>>8&0xff, i&0xff, 20000+i%1000), "10.96.0.1:53", lb.ProtoUDP)
				got[h.backendAt(h.balance(f).Dst)]++
			}
			for id, s := range share {
				want := n * s / len(slots)
				if got[id] < want/2 || got[id] > want*3/2 {
					t.Errorf("backend %d (%d of %d slots) took %d of %d new flows, want about %d", id, s, len(slots), got[id], n, want)
				}
			}
			if len(got) != len(share) {
				t.Errorf("new flows went to %d backends, want %d: %v", len(got), len(share), got)
			}
		})
	}
}

// A client pinned (session affinity) to the backend of the last slot,
// which has an entry of its own, stays pinned: the datapath finds the
// backend among the frontend's slots past the inline ones too.
func TestTCAffinityFindsAPinnedBackendPastTheInlineSlots(t *testing.T) {
	h := newDatapath(t, dpConfig())
	var slots []uint32
	for id := uint32(1); id <= 2*bpf.InlineSlots+3; id++ {
		h.backend(id, fmt.Sprintf("10.1.0.%d:8080/TCP", id), lb.BackendActive)
		slots = append(slots, id)
	}
	h.frontend(testFrontend{addr: "10.96.0.1:80/TCP", id: 1, affinity: 60, slots: slots})
	last := slots[len(slots)-1]
	key := bpf.AffinityKey{Client: netip.MustParseAddr("10.0.0.5").As16(), RevNatID: 1}
	now := monotonicSeconds(t)
	for _, hint := range []uint16{0, uint16(len(slots))} {
		h.check(h.maps.Affinity.Update(key, bpf.AffinityValue{BackendID: last, LastUsed: now, Slot: hint}))
		for port := 40000; port < 40020; port++ {
			if got := h.backendAt(h.balance(flow(fmt.Sprintf("10.0.0.5:%d", port), "10.96.0.1:80", lb.ProtoTCP)).Dst); got != last {
				t.Fatalf("hint %d: a new flow went to backend %d, not to %d, where the client is pinned", hint, got, last)
			}
		}
		if v, _, _ := h.maps.Affinity.Lookup(key); v.Slot != uint16(len(slots)) {
			t.Errorf("hint %d: the pin's slot hint is %d, want %d", hint, v.Slot, len(slots))
		}
	}
}
