package reconciler

import "testing"

// unmix64 inverts mix64, to make addresses whose hash is chosen.
func unmix64(h uint64) uint64 {
	inv := func(a uint64) uint64 { // a's inverse mod 2^64 (a odd): Newton
		x := a
		for range 5 {
			x *= 2 - a*x
		}
		return x
	}
	h ^= h >> 33
	h *= inv(0xc4ceb9fe1a85ec53)
	h ^= h >> 33
	h *= inv(0xff51afd7ed558ccd)
	h ^= h >> 33
	return h
}

// keyHashing returns an IPv4 address key whose hash has high as its high
// 32 bits (the slot's tag, and where its probe starts), the first from
// low on.
func keyHashing(t *testing.T, high uint32, low uint32) addrKey {
	for ; ; low++ {
		v := unmix64(uint64(high)<<32 | uint64(low))
		k := fromV4Key(v)
		if k.scope&addrIs4 == 0 { // an IPv6 key hashes otherwise
			continue
		}
		if got := hashKey(k) >> 32; got != uint64(high) {
			t.Fatalf("unmix64: hash high %#x, want %#x", got, high)
		}
		return k
	}
}

// Addresses whose hash's high half is 0 (a slot that is its arena index
// alone) or 1 (a slot that is a deleted one's value plus its index) are
// set, found, deleted and set again like any other, among others that
// probe over the same slots.
func TestKeyIndexHoldsAddressesWhoseTagLooksEmptyOrDeleted(t *testing.T) {
	var arena testKeys
	x := newKeyIndex(func(i uint32) addrKey { return arena.keys[i] })
	want := map[addrKey]uint32{}
	var keys []addrKey
	for _, high := range []uint32{0, 1, 0, 1, 0, 1 << 4, 1<<4 | 1} { // all probe from slot 0 or 1 of 16
		low := uint32(len(keys)) * 1000
		keys = append(keys, keyHashing(t, high, low))
	}
	for round := range 3 {
		for _, k := range keys {
			i := arena.add(k)
			x.set(k, i)
			want[k] = i
		}
		checkKeyIndex(t, round, &x, want)
		for j, k := range keys {
			if j%2 == round%2 {
				x.del(k)
				delete(want, k)
			}
		}
		checkKeyIndex(t, round, &x, want)
	}
}
