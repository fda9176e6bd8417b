package reconciler

import (
	"math/rand/v2"
	"testing"

	"github.com/lbstate/lbstate/bpf"
)

// keyOfServiceKey gives what the slow path through lb.L3n4Addr gives,
// for any bytes a pinned lb_services may hold: IPv4-mapped and IPv6
// addresses, every protocol and scope byte, padding set or not.
func TestKeyOfServiceKeyIsKeyOfItsAddress(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 200000 {
		var k bpf.ServiceKey
		for i := range k.Addr {
			k.Addr[i] = byte(r.Uint32())
		}
		if n%2 == 0 {
			copy(k.Addr[:12], v4InV6[:])
		}
		k.Port = [2]byte{byte(r.Uint32()), byte(r.Uint32())}
		k.Slot = uint16(r.Uint32())
		k.Proto, k.Scope = byte(r.Uint32()), byte(r.Uint32())
		if n%3 == 0 {
			k.Scope &= 0x3f // most keys: no bit addrKey keeps for itself
		}
		if n%5 == 0 {
			k.Pad = [2]uint8{byte(r.Uint32()), byte(r.Uint32())}
		}
		want := keyOf(k.L3n4Addr())
		wantSame := bpf.NewServiceKey(want.l3n4(), k.Slot) == k
		got, same := keyOfServiceKey(k)
		if got != want || same != wantSame {
			t.Fatalf("key %+v: got %+v (gives the key back: %v), want %+v (%v)", k, got, same, want, wantSame)
		}
	}
}
