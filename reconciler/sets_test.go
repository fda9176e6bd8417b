package reconciler

import (
	"slices"
	"testing"
)

// TestSmallSet checks the set against a map across the switch from slice
// to map and back to few elements.
func TestSmallSet(t *testing.T) {
	var s smallSet[int]
	want := map[int]bool{}
	for i, op := range []int{1, 2, 3, 2, 4, 5, 6, 7, 8, 9, 10, -3, -1, 11, 1, -10, -2, -4, -5, -6, -7, -8, -9, -11, 12} {
		k := max(op, -op)
		if op > 0 {
			if got := s.add(k); got == want[k] {
				t.Fatalf("op %d: add(%d) = %v with %v in the set", i, k, got, want[k])
			}
			want[k] = true
		} else {
			s.remove(k)
			delete(want, k)
		}
		if s.len() != len(want) {
			t.Fatalf("op %d: len %d, want %d", i, s.len(), len(want))
		}
		for k := range 13 {
			if s.has(k) != want[k] {
				t.Fatalf("op %d: has(%d) = %v", i, k, s.has(k))
			}
		}
		got := slices.Sorted(s.all())
		if len(got) != len(want) {
			t.Fatalf("op %d: all() = %v", i, got)
		}
	}
	if s.m == nil {
		t.Fatal("a set that grew past smallSetMax should have become a map")
	}
}
