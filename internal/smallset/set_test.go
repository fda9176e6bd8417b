package smallset

import (
	"slices"
	"testing"
)

// A Set agrees with a Go map across the switch from slices to a map and
// while it shrinks again.
func TestSetAgreesWithMap(t *testing.T) {
	var s Set[int]
	want := map[int]bool{}
	n := Max + 4
	// Add 1..n (past the switch to a map), remove most, add some back.
	var ops []int
	for k := 1; k <= n; k++ {
		ops = append(ops, k, k) // the second add finds it there
	}
	for k := 1; k < n; k++ {
		ops = append(ops, -k)
	}
	ops = append(ops, 3, -n, 5, -3)
	for i, op := range ops {
		k := max(op, -op)
		if op > 0 {
			if got := s.Add(k); got == want[k] {
				t.Fatalf("op %d: Add(%d) = %v with %v in the set", i, k, got, want[k])
			}
			want[k] = true
		} else {
			s.Remove(k)
			delete(want, k)
		}
		if s.Len() != len(want) {
			t.Fatalf("op %d: Len() = %d, want %d", i, s.Len(), len(want))
		}
		for k := range n + 2 {
			if s.Has(k) != want[k] {
				t.Fatalf("op %d: Has(%d) = %v", i, k, s.Has(k))
			}
		}
		got := slices.Sorted(slices.Values(s.Items()))
		if len(got) != len(want) || slices.ContainsFunc(got, func(k int) bool { return !want[k] }) {
			t.Fatalf("op %d: Items() = %v", i, got)
		}
		if i == 2*n-1 && s.m == nil {
			t.Fatal("a set that grew past Max should have become a map")
		}
	}
}

type entry struct {
	key   int
	value string
}

func entryKey(e *entry) int { return e.key }

// An Index finds an element by its key in a slice that grows past Max and
// has its elements changed in place.
func TestIndexFollowsGrowingSlice(t *testing.T) {
	x := NewIndex(entryKey)
	var elems []entry
	for k := range 3 * Max {
		if i := x.Find(elems, k); i != -1 {
			t.Fatalf("Find(%d) = %d before it was appended", k, i)
		}
		elems = append(elems, entry{k, "new"})
		elems[len(elems)-1].value = "changed"
		for _, probe := range []int{0, k / 2, k} {
			i := x.Find(elems, probe)
			if i < 0 || elems[i].key != probe {
				t.Fatalf("after appending %d: Find(%d) = %d", k, probe, i)
			}
		}
		if x.Has(elems, -1) {
			t.Fatal("Has(-1) = true")
		}
	}
	if x.m == nil {
		t.Fatalf("an Index of %d elements should have built its map", len(elems))
	}
}

// A set grown for n elements takes them without allocating again, and
// growing past Max changes nothing (the set becomes a map there).
func TestGrowMakesRoomOnce(t *testing.T) {
	allocs := testing.AllocsPerRun(10, func() {
		var s Set[uint32]
		s.Grow(10)
		for i := range uint32(10) {
			s.Add(i)
		}
	})
	if allocs != 1 {
		t.Errorf("10 adds after Grow(10) allocate %v times, want 1", allocs)
	}
	var s Set[uint32]
	s.Grow(Max + 1)
	if cap(s.list) != 0 {
		t.Errorf("Grow past Max reserved %d", cap(s.list))
	}
}
