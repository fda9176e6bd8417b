package reconciler

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/lbstate/lbstate/lb"
)

// testKeys is an arena of addresses for a keyIndex: keys[i] is the
// address of arena index i (0 unused, as in an arena).
type testKeys struct{ keys []addrKey }

func (k *testKeys) add(a addrKey) uint32 {
	if len(k.keys) == 0 {
		k.keys = append(k.keys, addrKey{})
	}
	k.keys = append(k.keys, a)
	return uint32(len(k.keys) - 1)
}

func testAddr(n int) addrKey {
	if n%5 == 0 { // some IPv6
		return keyOf(lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom16([16]byte{0x20, 1, 0xd, 0xb8, 12: byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), 80, lb.ScopeExternal))
	}
	return keyOf(lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{10, byte(n >> 16), byte(n >> 8), byte(n)}), uint16(8080+n%3), lb.ScopeExternal))
}

// A key index answers as a Go map would through any mix of sets,
// overwrites and deletes, across growing, reuse of deleted slots and
// compaction, and yields each address it holds once.
func TestKeyIndexAnswersAsAMapDoes(t *testing.T) {
	var arena testKeys
	x := newKeyIndex(func(i uint32) addrKey { return arena.keys[i] })
	want := map[addrKey]uint32{}
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 20000
	for step := range 200000 {
		a := testAddr(rng.IntN(n))
		switch op := rng.IntN(10); {
		case op < 5: // set (a new state for the address, as claimBackend makes)
			i := arena.add(a)
			x.set(a, i)
			want[a] = i
		case op < 9:
			x.del(a)
			delete(want, a)
		default:
			x.compact()
		}
		if step%10000 == 0 || step == 199999 {
			if x.len() != len(want) {
				t.Fatalf("step %d: len %d, want %d", step, x.len(), len(want))
			}
			checkKeyIndex(t, step, &x, want)
		}
	}
	if _, ok := x.get(testAddr(n + 1)); ok {
		t.Fatalf("an address never set is found")
	}
	for k := range want {
		x.del(k)
	}
	x.compact()
	if x.len() != 0 || x.peak >= compactMin || len(x.slots) > keyIndexMin {
		t.Fatalf("after deleting all: len %d, peak %d, %d slots", x.len(), x.peak, len(x.slots))
	}
}

// Deleting while iterating (restore parks the backends no frontend
// uses, the prune deletes the parked ones) neither skips nor repeats an
// address.
func TestKeyIndexDeleteWhileIterating(t *testing.T) {
	var arena testKeys
	x := newKeyIndex(func(i uint32) addrKey { return arena.keys[i] })
	const n = 5000
	for j := range n {
		a := testAddr(j)
		x.set(a, arena.add(a))
	}
	seen := map[addrKey]bool{}
	for k := range x.all() {
		if seen[k] {
			t.Fatalf("%v yielded twice", k.l3n4())
		}
		seen[k] = true
		x.del(k)
	}
	if len(seen) != n || x.len() != 0 {
		t.Fatalf("yielded %d of %d, %d left", len(seen), n, x.len())
	}
}

// The index of a million backends takes at most 16 bytes a backend (a
// Go map[uint64]uint32 took 36 at that size: clustermesh's million
// remote backends), and a table it grows into is never more than 7/8
// full.
func TestKeyIndexTakesAtMost16BytesAnAddress(t *testing.T) {
	for _, n := range []int{50000, 1000000} {
		var arena testKeys
		x := newKeyIndex(func(i uint32) addrKey { return arena.keys[i] })
		for j := range n {
			a := keyOf(lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{11, byte(j >> 16), byte(j >> 8), byte(j)}), 8080, lb.ScopeExternal))
			x.set(a, arena.add(a))
		}
		if per := 8 * len(x.slots) / n; per > 16 {
			t.Errorf("%d addresses: %d slots, %d bytes an address", n, len(x.slots), per)
		}
		if 8*x.used > 7*len(x.slots) {
			t.Errorf("%d addresses: %d slots used of %d", n, x.used, len(x.slots))
		}
	}
}

// BenchmarkBackendIndex compares claiming (a missed lookup, then a set)
// and finding 50,000 backends through a keyIndex and through an addrMap.
func BenchmarkBackendIndex(b *testing.B) {
	const n = 50000
	var arena testKeys
	keys := make([]addrKey, n)
	idx := make([]uint32, n)
	for j := range keys {
		keys[j] = keyOf(lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{11, byte(j >> 16), byte(j >> 8), byte(j)}), 8080, lb.ScopeExternal))
		idx[j] = arena.add(keys[j])
	}
	b.Run("keyIndex", func(b *testing.B) {
		for b.Loop() {
			x := newKeyIndex(func(i uint32) addrKey { return arena.keys[i] })
			for j, k := range keys {
				if _, ok := x.get(k); !ok {
					x.set(k, idx[j])
				}
			}
			for _, k := range keys {
				x.get(k)
			}
		}
	})
	b.Run("addrMap", func(b *testing.B) {
		for b.Loop() {
			m := newAddrMap()
			for j, k := range keys {
				if _, ok := m.get(k); !ok {
					m.set(k, idx[j])
				}
			}
			for _, k := range keys {
				m.get(k)
			}
		}
	})
}

// The claim path (claimBackend) looks an address up by its hash, reads
// ahead (prefetch) and, on a miss, adds it without a second lookup: the
// index then answers as one filled by set does, deleted slots reused and
// the table grown on the way.
func TestKeyIndexAddAfterAMissAnswersAsSetDoes(t *testing.T) {
	var arena testKeys
	x := newKeyIndex(func(i uint32) addrKey { return arena.keys[i] })
	want := map[addrKey]uint32{}
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 5000
	var batch []hashedKey
	for step := range 50000 {
		a := testAddr(rng.IntN(n))
		if rng.IntN(4) == 0 {
			x.del(a)
			delete(want, a)
			continue
		}
		k := hashedKey{a, hashKey(a)}
		if batch = append(batch, k); len(batch) == 10 {
			x.prefetch(batch)
			batch = batch[:0]
		}
		i, ok := x.getHashed(k.k, k.h)
		if w, held := want[a]; ok != held || ok && i != w {
			t.Fatalf("step %d: getHashed(%v) = %d, %v; want %d, %v", step, a.l3n4(), i, ok, w, held)
		}
		if !ok {
			i = arena.add(a)
			x.add(k.h, i)
			want[a] = i
		}
	}
	if x.len() != len(want) {
		t.Fatalf("len %d, want %d", x.len(), len(want))
	}
	checkKeyIndex(t, 50000, &x, want)
}
