package reconciler

import (
	"math"
	"slices"
	"testing"
)

func TestWeightedSlots(t *testing.T) {
	for _, tc := range []struct {
		weights []uint16
		max     int
		want    []int
	}{
		{[]uint16{100, 100, 100}, 256, []int{1, 1, 1}},
		{[]uint16{90, 10}, 256, []int{9, 1}},
		{[]uint16{50, 30, 20}, 256, []int{5, 3, 2}},
		{[]uint16{3, 7}, 256, []int{3, 7}},
		// 1000+1 units do not fit in 256: scaled, the small one keeps 1.
		{[]uint16{1000, 1}, 256, []int{256, 1}},
		{[]uint16{65535, 1, 30000}, 100, []int{69, 1, 31}},
		{[]uint16{7}, 256, []int{1}},
		{nil, 256, []int{}},
	} {
		got := weightedSlots(tc.weights, tc.max)
		if !slices.Equal(got, tc.want) {
			t.Errorf("weightedSlots(%v, %d) = %v, want %v", tc.weights, tc.max, got, tc.want)
		}
	}
}

// Scaled slot shares stay close to the weights: within one slot per
// backend of the exact share.
func TestWeightedSlotsProportional(t *testing.T) {
	weights := []uint16{997, 613, 401, 211, 97, 13}
	counts := weightedSlots(weights, 256)
	var sumW, sumC float64
	for i := range weights {
		sumW += float64(weights[i])
		sumC += float64(counts[i])
	}
	for i, w := range weights {
		exact := float64(w) / sumW * sumC
		if diff := float64(counts[i]) - exact; diff > 1 || diff < -1 {
			t.Errorf("backend %d (weight %d): %d slots, exact share %.2f", i, w, counts[i], exact)
		}
	}
}

func TestIDAllocator(t *testing.T) {
	a := newIDAllocator("test", "lb_test", 1<<20)
	a.reserve(5)
	var got []uint32
	for range 3 {
		id, err := a.alloc()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, id)
	}
	// Past the reserved ID, in order.
	if !slices.Equal(got, []uint32{6, 7, 8}) {
		t.Fatalf("allocated %v, want [6 7 8]", got)
	}
	a.free(6)
	if id, _ := a.alloc(); id != 9 {
		t.Fatalf("after freeing 6 the next ID is %d, want 9 (freed IDs are not reused soon)", id)
	}
	if !a.inUse(5) || a.inUse(6) {
		t.Fatal("inUse disagrees with reserve/free")
	}
}

// IDs on both sides of a bitmap page boundary and at the top of the space
// are tracked one by one, a freed page forgets them, and a full run of
// taken IDs after a wrap is skipped.
func TestIDAllocatorAcrossPagesAndWrap(t *testing.T) {
	a := newIDAllocator("test", "lb_test", 1<<20)
	for _, id := range []uint32{idPageBits - 1, idPageBits, 2*idPageBits + 3, math.MaxUint32 - 2} {
		a.reserve(id)
		if !a.inUse(id) || a.inUse(id+1) && id != idPageBits-1 {
			t.Fatalf("after reserving %d: inUse(%d)=%v inUse(%d)=%v", id, id, a.inUse(id), id+1, a.inUse(id+1))
		}
	}
	a.free(idPageBits)
	a.free(idPageBits) // twice: no effect
	if a.inUse(idPageBits) || !a.inUse(idPageBits-1) || a.inUseN != 3 {
		t.Fatalf("after free: inUse %v %v, %d in use", a.inUse(idPageBits), a.inUse(idPageBits-1), a.inUseN)
	}
	a.free(2*idPageBits + 3)
	if _, ok := a.used[2]; ok {
		t.Error("an empty page is kept")
	}
	// The last reserve moved next to the top: the allocator wraps to 1
	// and skips what is taken there.
	a.reserve(1)
	a.reserve(2)
	var got []uint32
	for range 2 {
		id, err := a.alloc()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, id)
	}
	if !slices.Equal(got, []uint32{math.MaxUint32 - 1, 3}) {
		t.Fatalf("allocated %v, want [%d 3]", got, uint32(math.MaxUint32-1))
	}
}
