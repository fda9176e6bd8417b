package reconciler

import (
	"encoding/binary"
	"iter"

	"github.com/lbstate/lbstate/lb"
)

// addrMap maps addresses to arena indexes. IPv4 addresses, nearly all in
// practice, are kept in a map of 8-byte keys (16-byte slots, hashed by
// the runtime's fast path for 64-bit keys), the others in one of
// addrKeys (24-byte slots): about 10 bytes less per address.
type addrMap struct {
	v4 map[uint64]uint32
	v6 map[addrKey]uint32
	// peak is the most addresses held since the maps were made: a Go map
	// keeps the room of its peak, which compact gives back.
	peak int
}

func newAddrMap() addrMap {
	return addrMap{v4: map[uint64]uint32{}, v6: map[addrKey]uint32{}}
}

// v4Key packs an IPv4 address key into 64 bits: address, port, protocol,
// scope (with its flags).
func v4Key(k addrKey) uint64 {
	return uint64(binary.BigEndian.Uint32(k.addr[12:]))<<32 | uint64(k.port)<<16 | uint64(k.proto)<<8 | uint64(k.scope)
}

func fromV4Key(v uint64) addrKey {
	k := addrKey{port: uint16(v >> 16), proto: lb.Protocol(v >> 8), scope: lb.Scope(v)}
	k.addr[10], k.addr[11] = 0xff, 0xff
	binary.BigEndian.PutUint32(k.addr[12:], uint32(v>>32))
	return k
}

// presize makes room for about n IPv4 addresses in an empty map, when
// about how many come is known (restore): growing a map to a million
// splits its tables over and over (0.25 s of CPU at restore). The room
// counts as held (peak), so that compact gives it back if far fewer came.
func (m *addrMap) presize(n int) {
	if m.len() == 0 {
		m.v4 = make(map[uint64]uint32, n)
		m.peak = max(m.peak, n)
	}
}

func (m *addrMap) get(k addrKey) (uint32, bool) {
	if k.scope&addrIs4 != 0 {
		i, ok := m.v4[v4Key(k)]
		return i, ok
	}
	i, ok := m.v6[k]
	return i, ok
}

func (m *addrMap) set(k addrKey, i uint32) {
	if k.scope&addrIs4 != 0 {
		m.v4[v4Key(k)] = i
	} else {
		m.v6[k] = i
	}
	m.peak = max(m.peak, m.len())
}

// compactMin is the peak below which compact leaves the maps alone.
const compactMin = 1024

// compact makes the maps anew once they hold less than a quarter of
// their peak, so that the room of addresses gone is given back (a
// delete-all of 200,000 backends once kept 5 MB). Each rebuild copies
// what is left, at most a quarter of the deletions since the last one.
// Not while all is iterating.
func (m *addrMap) compact() {
	if m.peak < compactMin || 4*m.len() >= m.peak {
		return
	}
	v4 := make(map[uint64]uint32, len(m.v4))
	for k, i := range m.v4 {
		v4[k] = i
	}
	v6 := make(map[addrKey]uint32, len(m.v6))
	for k, i := range m.v6 {
		v6[k] = i
	}
	m.v4, m.v6, m.peak = v4, v6, m.len()
}

func (m *addrMap) del(k addrKey) {
	if k.scope&addrIs4 != 0 {
		delete(m.v4, v4Key(k))
	} else {
		delete(m.v6, k)
	}
}

func (m *addrMap) len() int { return len(m.v4) + len(m.v6) }

// all yields every address and index; del may be called meanwhile.
func (m *addrMap) all() iter.Seq2[addrKey, uint32] {
	return func(yield func(addrKey, uint32) bool) {
		for v, i := range m.v4 {
			if !yield(fromV4Key(v), i) {
				return
			}
		}
		for k, i := range m.v6 {
			if !yield(k, i) {
				return
			}
		}
	}
}
