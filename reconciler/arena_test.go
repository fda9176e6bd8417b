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
