package tables

import (
	"bytes"
	"testing"

	"github.com/lbstate/lbstate/lb"
)

// Keys carved from one block stay what they were: an append to one (a
// caller's, never StateDB's) reallocates rather than writing over the
// next key.
func TestSlabKeysDoNotOverlap(t *testing.T) {
	var s keySlab
	a := s.clone([]byte{1, 2, 3})
	b := s.clone([]byte{4, 5, 6})
	if cap(a) != len(a) {
		t.Fatalf("a key's capacity %d runs past its length %d, into the next", cap(a), len(a))
	}
	_ = append(a, 9)
	if !bytes.Equal(a, []byte{1, 2, 3}) || !bytes.Equal(b, []byte{4, 5, 6}) {
		t.Fatalf("keys changed: %v %v", a, b)
	}
}

// The keys of several rows share an allocation: the point of the slab.
func TestSlabKeysShareABlock(t *testing.T) {
	var s keySlab
	k := []byte("123456789")
	allocs := testing.AllocsPerRun(700, func() { s.clone(k) })
	if allocs > 0.2 {
		t.Fatalf("%.2f allocations a key, want about 1/7", allocs)
	}
}

// A stored key is the lookup key: the indexes find their rows.
func TestStoredAddrKeyIsAddrKey(t *testing.T) {
	for _, s := range []string{"10.96.0.1:80/TCP", "[2001:db8::1]:443/UDP", "10.0.0.1:53/UDP/i"} {
		a, err := lb.ParseL3n4Addr(s)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := storedAddrKey(a), addrKey(a); !bytes.Equal(got, want) || cap(got) != len(got) {
			t.Errorf("%s: stored key %x (cap %d), want %x", s, got, cap(got), want)
		}
	}
}
