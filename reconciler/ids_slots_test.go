package reconciler

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lbstate/lbstate/bpf"
)

// The allocator never gives two live IDs one slot of their dense ID map,
// across the wrap from the top of the ID space to 1, and when every slot
// is held it fails with a map-full error naming the map, which the
// reconciler handles as it handles a full map (the frontend waits).
func TestIDAllocatorGivesEachLiveIDASlotOfItsOwn(t *testing.T) {
	const slots = 8
	a := newIDAllocator("backend", "lb_backends", slots)
	a.resume(math.MaxUint32 - 3) // four IDs before the wrap
	live := map[uint32]bool{}
	check := func() {
		t.Helper()
		held := map[uint32]uint32{}
		for id := range live {
			if other, ok := held[id%slots]; ok {
				t.Fatalf("live IDs %d and %d share slot %d", id, other, id%slots)
			}
			held[id%slots] = id
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	wrapped, fulls := false, 0
	for range 2000 {
		if rng.IntN(2) == 0 && len(live) > 0 {
			for id := range live {
				a.free(id)
				delete(live, id)
				break
			}
			continue
		}
		id, err := a.alloc()
		if len(live) == slots {
			var full *bpf.MapFullError
			if !errors.As(err, &full) || full.Map != "lb_backends" || full.MaxEntries != slots {
				t.Fatalf("with every slot held: %d, %v; want a map-full error of lb_backends", id, err)
			}
			fulls++
			continue
		}
		if err != nil {
			t.Fatalf("with %d of %d slots held: %v", len(live), slots, err)
		}
		if live[id] {
			t.Fatalf("ID %d handed out twice", id)
		}
		wrapped = wrapped || id < 100
		live[id] = true
		check()
	}
	if !wrapped || fulls == 0 {
		t.Fatalf("the run never wrapped (%v) or never filled the slots (%d times)", wrapped, fulls)
	}
}

// A released ID's slot goes to the next ID above the last one handed out
// that falls into it, not back to the released ID: IDs are still not
// reused soon.
func TestIDAllocatorReusesASlotWithANewID(t *testing.T) {
	a := newIDAllocator("frontend", "lb_rev_nat", 4)
	for want := uint32(1); want <= 4; want++ {
		if id, err := a.alloc(); err != nil || id != want {
			t.Fatalf("alloc = %d, %v; want %d", id, err, want)
		}
	}
	a.free(2)
	if id, err := a.alloc(); err != nil || id != 6 {
		t.Fatalf("after freeing 2 (slot 2 of 4): alloc = %d, %v; want 6", id, err)
	}
	// A restored ID whose slot another holds is in use but gets no slot.
	if a.reserve(9) || !a.inUse(9) {
		t.Fatal("reserve(9) took slot 1 from ID 1, or did not mark 9 in use")
	}
	a.free(9)
	if !a.inUse(1) || a.slotFree(5) {
		t.Fatal("freeing 9, which held no slot, freed ID 1's")
	}
}
