package reconciler

import (
	"encoding/binary"
	"iter"
)

// keyIndex finds arena indexes by address, for states that keep their
// own address (backendState.key): an open-addressed table of 8-byte
// slots, each an arena index and the high 32 bits of its address's hash
// (which also say where its probe starts, so that a table made anew
// needs no key), where a Go map[uint64]uint32 (addrMap) takes a 16-byte
// slot with the key in it, plus a control byte. A lookup compares the
// hash bits first and reads the state only when they match.
//
// A state's address must not change while the index holds it, and it
// must be deleted from the index before its arena index is released
// (release zeroes the state, and its slot could then never be found).
type keyIndex struct {
	keyOf func(i uint32) addrKey // the address of the state at arena index i
	// slots holds, for each live entry, hash>>32 in the high half and the
	// arena index (never 0: arena) in the low; 0 is empty and a low half
	// of 0 with a high one set is a deleted entry (tomb).
	slots []uint64
	n     int // live entries
	used  int // live and deleted entries: what probing passes over
	// peak is the most entries held since the table was last made, as in
	// addrMap.
	peak int
	// prefetched is what prefetch read, of no use.
	prefetched uint64
}

const (
	tomb = uint64(1) << 32
	// keyIndexMin is the smallest table (slots).
	keyIndexMin = 16
)

func newKeyIndex(keyOf func(uint32) addrKey) keyIndex { return keyIndex{keyOf: keyOf} }

// hashKey mixes an address key into 64 bits (the finalizer of
// MurmurHash3: every input bit moves every output bit).
func hashKey(k addrKey) uint64 {
	var h uint64
	if k.scope&addrIs4 != 0 {
		h = v4Key(k)
	} else {
		h = binary.LittleEndian.Uint64(k.addr[:8]) ^ mix64(binary.LittleEndian.Uint64(k.addr[8:])^
			uint64(k.port)<<16^uint64(k.proto)<<8^uint64(k.scope))
	}
	return mix64(h)
}

func mix64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// find returns the slot holding k, or -1.
func (x *keyIndex) find(k addrKey, h uint64) int {
	if len(x.slots) == 0 {
		return -1
	}
	mask := uint64(len(x.slots) - 1)
	tag := h &^ (1<<32 - 1)
	for p := (h >> 32) & mask; ; p = (p + 1) & mask {
		s := x.slots[p]
		switch {
		case s == 0:
			return -1
		case s&^(1<<32-1) == tag && uint32(s) != 0 && x.keyOf(uint32(s)) == k:
			return int(p)
		}
	}
}

func (x *keyIndex) get(k addrKey) (uint32, bool) { return x.getHashed(k, hashKey(k)) }

// getHashed is get with k's hash h (hashKey) at hand.
func (x *keyIndex) getHashed(k addrKey, h uint64) (uint32, bool) {
	p := x.find(k, h)
	if p < 0 {
		return 0, false
	}
	return uint32(x.slots[p]), true
}

// set makes k find i; the state at i must have the address k.
func (x *keyIndex) set(k addrKey, i uint32) {
	h := hashKey(k)
	if p := x.find(k, h); p >= 0 {
		x.slots[p] = h&^(1<<32-1) | uint64(i)
		return
	}
	x.add(h, i)
}

// add makes the key of hash h find i; the key must not be in the index
// (a lookup just missed it), and the state at i must have it.
func (x *keyIndex) add(h uint64, i uint32) {
	if 8*(x.used+1) > 7*len(x.slots) {
		x.resize(x.n + 1)
	}
	x.put(h&^(1<<32-1) | uint64(i))
	x.n++
	x.peak = max(x.peak, x.n)
}

// prefetch reads the first slot of each hash's probe. A table of a
// million backends is far larger than the caches, and a lookup's first
// read of it misses them: these reads, independent of each other, wait
// for memory together, where the lookups one after the other would wait
// in turn.
func (x *keyIndex) prefetch(keys []hashedKey) {
	if len(x.slots) == 0 {
		return
	}
	mask := uint64(len(x.slots) - 1)
	var sum uint64
	for _, k := range keys {
		sum += x.slots[(k.h>>32)&mask]
	}
	x.prefetched = sum // (kept, so that the reads are not left out)
}

// hashedKey is an address key with its hash (hashKey).
type hashedKey struct {
	k addrKey
	h uint64
}

// put places a slot value in the first free or deleted slot of its probe.
func (x *keyIndex) put(v uint64) {
	mask := uint64(len(x.slots) - 1)
	for p := (v >> 32) & mask; ; p = (p + 1) & mask {
		// The probe starts from the hash's high half, which is all a
		// slot keeps of it: a table made anew then places each entry
		// where a lookup, which starts from the same bits, finds it.
		switch s := x.slots[p]; {
		case s == 0:
			x.used++
			fallthrough
		case uint32(s) == 0:
			x.slots[p] = v
			return
		}
	}
}

// resize makes the table anew with room for n entries at most half full,
// dropping the deleted ones. (set grows it at 7/8: from half full, the
// table is 0.5 to 0.875 full, 9 to 16 bytes an entry.)
func (x *keyIndex) resize(n int) {
	size := keyIndexMin
	for 2*n > size {
		size *= 2
	}
	old := x.slots
	x.slots, x.used = make([]uint64, size), 0
	for _, s := range old {
		if uint32(s) != 0 {
			x.put(s)
		}
	}
}

func (x *keyIndex) del(k addrKey) {
	if p := x.find(k, hashKey(k)); p >= 0 {
		x.slots[p] = tomb
		x.n--
	}
}

func (x *keyIndex) len() int { return x.n }

// presize makes room for about n addresses in an empty index, when about
// how many come is known (restore). The room counts as held (peak), so
// that compact gives it back if far fewer came.
func (x *keyIndex) presize(n int) {
	if x.n == 0 {
		x.resize(n)
		x.peak = max(x.peak, n)
	}
}

// compact makes the table anew once it holds less than a quarter of its
// peak, as addrMap.compact does. Not while all is iterating.
func (x *keyIndex) compact() {
	if x.peak < compactMin || 4*x.n >= x.peak {
		return
	}
	x.resize(x.n)
	x.peak = x.n
}

// all yields every address and index; del may be called meanwhile (set
// may not).
func (x *keyIndex) all() iter.Seq2[addrKey, uint32] {
	return func(yield func(addrKey, uint32) bool) {
		for p := 0; p < len(x.slots); p++ {
			if i := uint32(x.slots[p]); i != 0 && !yield(x.keyOf(i), i) {
				return
			}
		}
	}
}
