package reconciler

import (
	"net/netip"
	"testing"
	"unsafe"

	"github.com/lbstate/lbstate/lb"
)

// An address key gives back the address it was made from: IPv4 (not
// read as IPv4-mapped IPv6), IPv6, either scope, any protocol; and two
// addresses that differ in any part have different keys.
func TestAddrKeyRoundTripsAndSeparatesAddresses(t *testing.T) {
	addrs := []lb.L3n4Addr{
		lb.MustParseL3n4Addr("10.96.0.1:80/TCP"),
		lb.MustParseL3n4Addr("10.96.0.1:80/UDP"),
		lb.MustParseL3n4Addr("10.96.0.1:81/TCP"),
		lb.MustParseL3n4Addr("10.96.0.1:80/TCP/i"),
		lb.MustParseL3n4Addr("[::ffff:10.96.0.2]:80/TCP"),
		lb.MustParseL3n4Addr("[2001:db8::1]:443/SCTP"),
		lb.MustParseL3n4Addr("[::]:30000/TCP"),
		lb.MustParseL3n4Addr("0.0.0.0:30000/TCP"),
		lb.NewL3n4Addr(lb.ProtoTCP, netip.MustParseAddr("::ffff:10.96.0.1"), 80, lb.ScopeExternal), // stored unmapped
		{}, // the rejected share's
	}
	seen := map[addrKey]lb.L3n4Addr{}
	for _, a := range addrs {
		k := keyOf(a)
		if got := k.l3n4(); got != a {
			t.Errorf("%v: key gives back %v", a, got)
		}
		if other, ok := seen[k]; ok && other != a {
			t.Errorf("%v and %v have the same key", a, other)
		}
		seen[k] = a
	}
	if n := unsafe.Sizeof(addrKey{}); n != 20 {
		t.Errorf("addrKey is %d bytes, want 20", n)
	}
}

// The states stay packed: a frontend's costs 48 bytes in its arena, a
// backend's 56.
func TestStatesStayPacked(t *testing.T) {
	if n := unsafe.Sizeof(frontendState{}); n != 48 {
		t.Errorf("frontendState is %d bytes", n)
	}
	if n := unsafe.Sizeof(backendState{}); n != 56 {
		t.Errorf("backendState is %d bytes", n)
	}
}

// An arena hands out each index once until it is released, never 0,
// keeps values where they are while it grows, and gives a released
// index back zeroed.
func TestArenaIndexesAreStableAndReused(t *testing.T) {
	var a arena[backendState]
	ptrs := map[uint32]*backendState{}
	for n := range 3 * arenaChunk {
		i, be := a.alloc()
		if i == 0 || ptrs[i] != nil {
			t.Fatalf("alloc %d: index %d", n, i)
		}
		be.id = i
		ptrs[i] = be
	}
	for i, p := range ptrs {
		if a.at(i) != p || p.id != i {
			t.Fatalf("index %d moved or changed", i)
		}
	}
	a.release(7)
	i, be := a.alloc()
	if i != 7 || be.id != 0 {
		t.Fatalf("after releasing 7, alloc gave %d with id %d, want 7 zeroed", i, be.id)
	}
}

// A frontend's backends and known slots are kept inline while it has one
// of each and spill out beyond, with the same contents either way.
func TestFrontendStateListsSpillAndShrink(t *testing.T) {
	var st frontendState
	if !st.addBackend(5) || st.addBackend(5) || st.more != nil {
		t.Fatal("one backend is not kept inline, once")
	}
	if !st.addBackend(9) || !st.addBackend(2) || st.addBackend(9) {
		t.Fatal("more backends are not added once each")
	}
	st.removeBackend(5)
	if got := st.backends(); len(got) != 2 || got[0] != 9 || got[1] != 2 {
		t.Fatalf("backends %v, want [9 2]", got)
	}
	st.setWritten([]uint32{4})
	if w := st.written(); len(w) != 1 || w[0] != 4 {
		t.Fatalf("one slot: written %v", w)
	}
	st.setWritten([]uint32{4, 5, 6})
	st.truncateWritten(2)
	if w := st.written(); len(w) != 2 || w[1] != 5 {
		t.Fatalf("truncated to 2: written %v", w)
	}
	st.truncateWritten(1)
	if w := st.written(); len(w) != 1 || w[0] != 4 || st.more.written != nil {
		t.Fatalf("truncated to 1: written %v, spilled %v", w, st.more.written)
	}
	st.setWritten(nil)
	if len(st.written()) != 0 {
		t.Fatal("forgotten slots are still known")
	}
}

// An address map finds every address it was given, IPv4 or IPv6, yields
// each back unchanged, and forgets what is deleted.
func TestAddrMapKeepsIPv4AndIPv6Apart(t *testing.T) {
	m := newAddrMap()
	addrs := []lb.L3n4Addr{
		lb.MustParseL3n4Addr("10.96.0.1:80/TCP"),
		lb.MustParseL3n4Addr("10.96.0.1:80/TCP/i"),
		lb.MustParseL3n4Addr("10.96.0.1:80/UDP"),
		lb.MustParseL3n4Addr("[::ffff:10.96.0.2]:80/TCP"),
		lb.MustParseL3n4Addr("[2001:db8::1]:443/SCTP"),
		lb.MustParseL3n4Addr("[::a60:1]:80/TCP"), // 10.96.0.1's bits, in IPv6
	}
	for i, a := range addrs {
		m.set(keyOf(a), uint32(i+1))
	}
	if m.len() != len(addrs) {
		t.Fatalf("len %d, want %d", m.len(), len(addrs))
	}
	for i, a := range addrs {
		if got, ok := m.get(keyOf(a)); !ok || got != uint32(i+1) {
			t.Errorf("%v: got %d %v, want %d", a, got, ok, i+1)
		}
	}
	seen := map[lb.L3n4Addr]uint32{}
	for k, i := range m.all() {
		seen[k.l3n4()] = i
	}
	for i, a := range addrs {
		if seen[a] != uint32(i+1) {
			t.Errorf("all() gives %v as %d, want %d", a, seen[a], i+1)
		}
	}
	m.del(keyOf(addrs[0]))
	m.del(keyOf(addrs[4]))
	if _, ok := m.get(keyOf(addrs[0])); ok || m.len() != len(addrs)-2 {
		t.Errorf("deleted addresses are still there (len %d)", m.len())
	}
}

// An arena reuses the lowest free index, and gives back its chunks as
// they empty from the end: after every value is released it holds none,
// and it works as new afterwards. (Chunks were once kept for good: a
// delete-all of 200,000 backends kept 11 MB.)
func TestArenaGivesBackEmptyChunks(t *testing.T) {
	var a arena[backendState]
	var idx []uint32
	for range 5*arenaChunk - 1 { // indexes 1..5119: five chunks
		i, be := a.alloc()
		be.id = i
		idx = append(idx, i)
	}
	// Release from the front, then every other one, then the rest:
	// the last chunk empties last.
	for _, i := range idx[:arenaChunk] {
		a.release(i)
	}
	if len(a.chunks) != 5 {
		t.Fatalf("%d chunks with the last four in use, want 5", len(a.chunks))
	}
	if i, _ := a.alloc(); i != 1 {
		t.Fatalf("alloc gave %d, want the lowest free index, 1", i)
	}
	a.release(1)
	for k := arenaChunk; k < len(idx); k += 2 {
		a.release(idx[k])
	}
	for k := arenaChunk + 1; k < len(idx); k += 2 {
		if next := k + 2; next < len(idx) && a.at(idx[next]).id != idx[next] { // what is in use stays put
			t.Fatalf("index %d changed", idx[next])
		}
		a.release(idx[k])
	}
	if len(a.chunks) != 0 || len(a.free) != 0 || a.next != 0 {
		t.Fatalf("everything released: %d chunks, %d free indexes, next %d; want none", len(a.chunks), len(a.free), a.next)
	}
	for n := range 3 * arenaChunk {
		i, be := a.alloc()
		if i != uint32(n+1) || be.id != 0 {
			t.Fatalf("alloc %d after emptying: index %d id %d", n, i, be.id)
		}
	}
}

// Indexes released in any order come back lowest first, each once, with
// chunks given back and regrown in between.
func TestArenaReusesEachFreeIndexOnce(t *testing.T) {
	var a arena[frontendState]
	inUse := map[uint32]bool{}
	seed := uint32(7)
	rnd := func(n int) int { seed = seed*1664525 + 1013904223; return int(seed>>8) % n }
	for step := range 20000 {
		if len(inUse) > 0 && (rnd(3) == 0 || len(inUse) > 3*arenaChunk) {
			// release a random one in use
			k := rnd(len(inUse))
			for i := range inUse {
				if k == 0 {
					a.release(i)
					delete(inUse, i)
					break
				}
				k--
			}
			continue
		}
		i, st := a.alloc()
		if i == 0 || inUse[i] || st.id != 0 {
			t.Fatalf("step %d: alloc gave %d (in use %v, id %d)", step, i, inUse[i], st.id)
		}
		for j := uint32(1); j < i; j++ {
			if !inUse[j] {
				t.Fatalf("step %d: alloc gave %d while %d was free", step, i, j)
			}
		}
		st.id = i
		inUse[i] = true
	}
	for i := range inUse {
		if a.at(i).id != i {
			t.Fatalf("index %d holds %d", i, a.at(i).id)
		}
	}
}

// An address map made anew once it holds under a quarter of its peak
// keeps every address left, and deletes still work after.
func TestAddrMapCompactKeepsWhatIsLeft(t *testing.T) {
	m := newAddrMap()
	key := func(n int) addrKey {
		if n%5 == 0 { // some IPv6
			return keyOf(lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom16([16]byte{0x20, 1, 0xd, 0xb8, 14: byte(n >> 8), 15: byte(n)}), 80, lb.ScopeExternal))
		}
		return keyOf(lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{10, 0, byte(n >> 8), byte(n)}), 80, lb.ScopeExternal))
	}
	const n = 4 * compactMin
	for i := range n {
		m.set(key(i), uint32(i+1))
	}
	for i := range n {
		if i%8 != 0 {
			m.del(key(i))
		}
		m.compact()
	}
	if m.peak >= n {
		t.Fatalf("peak %d after deleting 7 in 8: the maps were not made anew", m.peak)
	}
	for i := range n {
		got, ok := m.get(key(i))
		if want := i%8 == 0; ok != want || (ok && got != uint32(i+1)) {
			t.Fatalf("address %d: %d %v after compacting", i, got, ok)
		}
	}
	for i := 0; i < n; i += 8 {
		m.del(key(i))
	}
	m.compact()
	if m.len() != 0 || m.peak >= compactMin {
		t.Fatalf("len %d peak %d after deleting all, want 0 and a peak under %d", m.len(), m.peak, compactMin)
	}
}
