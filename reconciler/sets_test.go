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
	n := smallSetMax + 4
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
		for k := range n + 2 {
			if s.has(k) != want[k] {
				t.Fatalf("op %d: has(%d) = %v", i, k, s.has(k))
			}
		}
		if got := slices.Sorted(slices.Values(s.items())); len(got) != len(want) {
			t.Fatalf("op %d: all() = %v", i, got)
		}
		if i == 2*n-1 && s.m == nil {
			t.Fatal("a set that grew past smallSetMax should have become a map")
		}
	}
}
