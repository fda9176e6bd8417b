package slab

import (
	"bytes"
	"testing"
)

// Copies carved from one block stay what they were: an append to one
// reallocates rather than writing over the next copy.
func TestSlabCopiesDoNotOverlap(t *testing.T) {
	var s Slab
	a := s.Bytes([]byte{1, 2, 3})
	b := s.Bytes([]byte{4, 5, 6})
	if cap(a) != len(a) {
		t.Fatalf("a copy's capacity %d runs past its length %d, into the next", cap(a), len(a))
	}
	_ = append(a, 9)
	if !bytes.Equal(a, []byte{1, 2, 3}) || !bytes.Equal(b, []byte{4, 5, 6}) {
		t.Fatalf("copies changed: %v %v", a, b)
	}
}

// Several copies share an allocation: the point of the slab.
func TestSlabCopiesShareABlock(t *testing.T) {
	var s Slab
	k := []byte("123456789")
	if allocs := testing.AllocsPerRun(700, func() { s.Bytes(k) }); allocs > 0.2 {
		t.Fatalf("%.2f allocations a 9-byte copy, want about 1/7", allocs)
	}
	name := "default/web-1234" // 16 bytes
	if allocs := testing.AllocsPerRun(400, func() { s.String(name) }); allocs > 0.3 {
		t.Fatalf("%.2f allocations a 16-byte name, want about 1/4", allocs)
	}
}

// A copy equals its original, whatever its length.
func TestSlabCopiesEqualTheirOriginals(t *testing.T) {
	var s Slab
	for _, str := range []string{"", "a", "default/web", string(make([]byte, BlockSize/2)), string(make([]byte, BlockSize/2+1)), string(make([]byte, 3*BlockSize))} {
		if got := s.String(str); got != str {
			t.Errorf("String(%q) = %q", str, got)
		}
		if got := s.Bytes([]byte(str)); string(got) != str || cap(got) != len(got) && len(str) <= BlockSize/2 {
			t.Errorf("Bytes(%q) = %q (cap %d)", str, got, cap(got))
		}
	}
}
