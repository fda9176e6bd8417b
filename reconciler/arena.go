package reconciler

import (
	"net/netip"

	"github.com/lbstate/lbstate/lb"
)

// The reconciler keeps a state per frontend and per backend, tens of
// thousands of each. They live in arenas, found through maps from a
// compact address key to their index, rather than as an allocation each
// behind a map of lb.L3n4Addr: a state then costs its size and its map
// slot (24 bytes, no pointer for the collector to follow) and no object
// of its own.

// addrKey is an lb.L3n4Addr as a map key: 20 bytes without a pointer,
// where an lb.L3n4Addr takes 32 with one (netip.Addr's zone handle).
type addrKey struct {
	addr  [16]byte
	port  uint16
	proto lb.Protocol
	// scope is the address's scope, with addrIs4 set for an IPv4 address
	// (addr holds it IPv4-mapped) and addrValid for any valid one.
	scope lb.Scope
}

const (
	addrIs4    lb.Scope = 0x40
	addrValid  lb.Scope = 0x80
	scopeFlags          = addrIs4 | addrValid
)

func keyOf(a lb.L3n4Addr) addrKey {
	ip := a.Addr()
	k := addrKey{addr: ip.As16(), port: a.Port(), proto: a.Protocol(), scope: a.Scope()}
	if ip.IsValid() {
		k.scope |= addrValid
	}
	if ip.Is4() {
		k.scope |= addrIs4
	}
	return k
}

// l3n4 returns the address k was made from. (lb.L3n4Addr rejects zoned
// IPv6 addresses, so nothing is lost.)
func (k addrKey) l3n4() lb.L3n4Addr {
	var ip netip.Addr
	switch {
	case k.scope&addrIs4 != 0:
		ip = netip.AddrFrom16(k.addr).Unmap()
	case k.scope&addrValid != 0:
		ip = netip.AddrFrom16(k.addr)
	}
	return lb.NewL3n4Addr(k.proto, ip, k.port, k.scope&^scopeFlags)
}

// arenaChunk is how many states an arena allocates at a time.
const arenaChunk = 1024

// arena holds values of T in chunks, each value found by an index that
// stays valid (and its pointer stable) until it is released. Index 0 is
// never handed out, so that it can stand for none. Released indexes are
// reused; chunks are kept, as a Go map keeps its buckets.
type arena[T any] struct {
	chunks []*[arenaChunk]T
	free   []uint32
	next   uint32 // the lowest index never handed out
}

// alloc returns a zeroed value and its index.
func (a *arena[T]) alloc() (uint32, *T) {
	if n := len(a.free); n > 0 {
		i := a.free[n-1]
		a.free = a.free[:n-1]
		return i, a.at(i)
	}
	if a.next == 0 {
		a.next = 1
	}
	i := a.next
	a.next++
	if int(i/arenaChunk) == len(a.chunks) {
		a.chunks = append(a.chunks, new([arenaChunk]T))
	}
	return i, a.at(i)
}

// at returns the value of index i.
func (a *arena[T]) at(i uint32) *T {
	return &a.chunks[i/arenaChunk][i%arenaChunk]
}

// release zeroes the value of index i (dropping what it points to) and
// makes the index free for reuse.
func (a *arena[T]) release(i uint32) {
	var zero T
	*a.at(i) = zero
	a.free = append(a.free, i)
}
