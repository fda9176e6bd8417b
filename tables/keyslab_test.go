package tables

import (
	"bytes"
	"testing"

	"github.com/lbstate/lbstate/lb"
)

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
