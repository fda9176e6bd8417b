package bpf_test

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// The datapath's flow hash (lb_flow_hash in lb.h), keyed by the maps'
// seed, and bpf.FlowSeed.FlowHash agree:
// with a Maglev table whose every slot holds a backend of its own, the
// backend the kernel picks names the slot it hashed to, which must be
// FlowHash modulo the table size, for random flows of both families and
// protocols, and for an any-protocol frontend (protocol byte 0).
func TestFlowHashMatchesC(t *testing.T) {
	cfg := bpf.DefaultConfig // Maglev tables of 16381 slots
	h := newDatapath(t, cfg)
	m := cfg.LBMaglevTableSize
	// Backend i+1 (IPv4) and m+i+1 (IPv6) sit in slot i of their family's table.
	ids := make([]uint32, 2*m)
	backends := make([]bpf.Backend, 2*m)
	slotOf := map[netip.AddrPort]uint32{}
	tables := [2][]uint32{make([]uint32, m), make([]uint32, m)}
	for i := range 2 * m {
		a := netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})
		if i >= m {
			a = netip.AddrFrom16([16]byte{0xfd, 15: byte(i), 14: byte(i >> 8)})
		}
		ids[i] = i + 1
		tables[i/m][i%m] = i + 1
		backends[i] = bpf.NewBackend(lb.BackendRef{Address: lb.NewL3n4Addr(lb.ProtoTCP, a, 8080, lb.ScopeExternal)}, 0)
		slotOf[netip.AddrPortFrom(a, 8080)] = i % m
	}
	h.check(h.maps.Backends.BatchUpdate(ids, backends))
	frontends := []string{"10.96.0.1:80/TCP", "10.96.0.2:53/UDP", "[fd00:96::1]:80/TCP", "[fd00:96::2]:53/UDP", "10.96.0.3:53/ANY"}
	for i, fe := range frontends {
		table := tables[0]
		if lb.MustParseL3n4Addr(fe).Addr().Is6() {
			table = tables[1]
		}
		h.frontend(testFrontend{addr: fe, id: uint32(i + 1), maglev: true, slots: []uint32{1}, table: table})
	}
	seed, err := h.maps.Seed()
	h.check(err)
	if seed.IsZero() {
		t.Fatal("the kernel maps have no flow hash seed")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		fe := lb.MustParseL3n4Addr(frontends[rng.IntN(len(frontends))])
		proto := fe.Protocol()
		if proto == lb.ProtoAny {
			proto = lb.ProtoUDP
		}
		client := netip.AddrPortFrom(netip.AddrFrom4([4]byte{byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32())}), uint16(rng.Uint32()))
		if fe.Addr().Is6() {
			var a [16]byte
			for j := range a {
				a[j] = byte(rng.Uint32())
			}
			client = netip.AddrPortFrom(netip.AddrFrom16(a), client.Port())
		}
		f := tuple{Src: client, Dst: fe.AddrPort(), Proto: proto}
		out := h.balance(f)
		slot, ok := slotOf[out.Dst]
		if !ok {
			t.Fatalf("%v went to %s, not a backend", f, out.Dst)
		}
		if want := seed.FlowHash(client, fe) % m; slot != want {
			t.Fatalf("%v: the kernel hashed to slot %d, bpf.FlowHash says %d", f, slot, want)
		}
	}
}
