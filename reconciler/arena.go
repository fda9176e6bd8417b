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
	k := addrKey{addr: a.As16(), port: a.Port(), proto: a.Protocol(), scope: a.Scope()}
	if a.IsValid() {
		k.scope |= addrValid
	}
	if a.Is4() {
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
// reused lowest first, so that the values gather in the first chunks and
// the chunks at the end empty out as the values go: an empty last chunk
// is given back (a delete-all once kept every chunk of the peak).
type arena[T any] struct {
	chunks []*[arenaChunk]T
	live   []uint16 // the values in use in each chunk
	free   freeHeap // released indexes below next, and stale ones (>= next)
	stale  int      // how many of free are >= next
	next   uint32   // the lowest index never handed out, or given back
}

// alloc returns a zeroed value and its index.
func (a *arena[T]) alloc() (uint32, *T) {
	if len(a.free) > 0 && a.free[0] >= a.next { // all stale: the lowest is
		a.free, a.stale = a.free[:0], 0
	}
	if len(a.free) > 0 {
		i := a.free.pop()
		a.live[i/arenaChunk]++
		return i, a.at(i)
	}
	if a.next == 0 {
		a.next = 1
	}
	i := a.next
	a.next++
	if int(i/arenaChunk) == len(a.chunks) {
		a.chunks = append(a.chunks, new([arenaChunk]T))
		a.live = append(a.live, 0)
	}
	a.live[i/arenaChunk]++
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
	a.free.push(i)
	c := i / arenaChunk
	a.live[c]--
	if int(c) == len(a.chunks)-1 && a.live[c] == 0 {
		a.shrink()
	}
}

// shrink gives back the empty chunks at the end. Their indexes, all in
// free, become stale there: alloc skips them, and free is rebuilt
// without them once they are most of it.
func (a *arena[T]) shrink() {
	n := len(a.chunks)
	for n > 0 && a.live[n-1] == 0 {
		a.chunks[n-1] = nil
		n--
	}
	a.chunks, a.live = a.chunks[:n], a.live[:n]
	next := uint32(n * arenaChunk)
	a.stale += int(a.next - max(next, 1)) // index 0 was never free
	if n == 0 {
		next = 0
	}
	a.next = next
	if a.stale > len(a.free)/2 {
		kept := a.free[:0]
		for _, i := range a.free {
			if i < a.next {
				kept = append(kept, i)
			}
		}
		if cap(kept) > 4*len(kept)+64 {
			kept = append(freeHeap(nil), kept...)
		}
		a.free, a.stale = kept, 0
		a.free.init()
	}
}

// freeHeap is a min-heap of indexes.
type freeHeap []uint32

func (h *freeHeap) push(i uint32) {
	*h = append(*h, i)
	h.up(len(*h) - 1)
}

func (h *freeHeap) pop() uint32 {
	s := *h
	i := s[0]
	n := len(s) - 1
	s[0] = s[n]
	*h = s[:n]
	h.down(0)
	return i
}

func (h freeHeap) init() {
	for j := len(h)/2 - 1; j >= 0; j-- {
		h.down(j)
	}
}

func (h freeHeap) up(j int) {
	for j > 0 {
		p := (j - 1) / 2
		if h[p] <= h[j] {
			return
		}
		h[p], h[j] = h[j], h[p]
		j = p
	}
}

func (h freeHeap) down(j int) {
	for {
		l := 2*j + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r] < h[l] {
			m = r
		}
		if h[j] <= h[m] {
			return
		}
		h[j], h[m] = h[m], h[j]
		j = m
	}
}
