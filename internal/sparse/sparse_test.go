package sparse

import (
	"math/rand/v2"
	"testing"
)

// An Array reads as a plain array under any sequence of Set and Clear:
// elements never set or cleared read as zero, the others as last set,
// and Len counts those set.
func TestArrayReadsAsAPlainArray(t *testing.T) {
	const n = 5*pageLen + 7 // a last page of 7
	r := rand.New(rand.NewPCG(1, 2))
	a, want, set := New[int](n), make([]int, n), make([]bool, n)
	for step := range 200_000 {
		i := uint32(r.IntN(n))
		if r.IntN(3) == 0 {
			a.Clear(i)
			want[i], set[i] = 0, false
		} else {
			a.Set(i, step+1)
			want[i], set[i] = step+1, true
		}
	}
	count := 0
	for i := range uint32(n) {
		if got := a.Get(i); got != want[i] {
			t.Fatalf("element %d: %d, want %d", i, got, want[i])
		}
		if a.IsSet(i) != set[i] {
			t.Fatalf("element %d: IsSet %v, want %v", i, a.IsSet(i), set[i])
		}
		if set[i] {
			count++
		}
	}
	if a.Len() != count {
		t.Errorf("Len %d, want %d", a.Len(), count)
	}
}

// Memory goes with use: a fresh Array has no page, a page comes with its
// first element set and goes with its last one cleared.
func TestArrayHoldsPagesOnlyWhileElementsAreSet(t *testing.T) {
	a := New[uint32](1 << 20)
	pages := func() int {
		n := 0
		for _, p := range a.pages {
			if p != nil {
				n++
			}
		}
		return n
	}
	if pages() != 0 {
		t.Fatalf("a fresh array holds %d pages", pages())
	}
	a.Set(3, 0) // set to the zero value is set all the same
	a.Set(pageLen+1, 9)
	if pages() != 2 || !a.IsSet(3) || a.Len() != 2 {
		t.Fatalf("after two sets in two pages: %d pages, IsSet(3) %v, Len %d", pages(), a.IsSet(3), a.Len())
	}
	a.Clear(3)
	a.Clear(3) // twice is once
	if pages() != 1 || a.Len() != 1 {
		t.Fatalf("after clearing one page's only element: %d pages, Len %d", pages(), a.Len())
	}
}

// A window of elements moving through the array, as live IDs do, takes
// no new page once it has moved a page: the page it leaves is reused
// where it arrives. Once, every step of a page allocated one.
func TestArrayReusesThePageAWindowLeaves(t *testing.T) {
	const window = 3 * pageLen
	a := New[uint64](1 << 20)
	for i := range uint32(window) {
		a.Set(i, 1)
	}
	next := uint32(window)
	allocs := testing.AllocsPerRun(10, func() { // 11 runs of 64 pages
		for range 64 * pageLen {
			a.Set(next, uint64(next))
			a.Clear(next - window)
			next++
		}
	})
	if allocs != 0 {
		t.Errorf("moving a window of %d elements by 64 pages allocated %v times", window, allocs)
	}
	if a.Len() != window {
		t.Errorf("Len %d, want %d", a.Len(), window)
	}
}
