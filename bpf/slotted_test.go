package bpf_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/lbstate/lbstate/bpf"
)

// A dense ID map behaves as a map keyed by ID over its slots, the same in
// memory and in the kernel: an ID reads back only from its own slot, a
// stale ID sharing the slot of a live one neither reads nor clears it,
// and writing an ID into a slot another live ID holds is an error that
// names the map, the slot and both IDs, and changes nothing.
func TestDenseIDMapKeepsOneLiveIDPerSlot(t *testing.T) {
	cfg := smallConfig() // lb_backends: 8 slots
	implementations(t, cfg, func(t *testing.T, m *bpf.Maps) {
		n := cfg.LBBackendsMax
		if err := m.Backends.BatchUpdate([]uint32{3, 4}, []bpf.Backend{{ClusterID: 3}, {ClusterID: 4}}); err != nil {
			t.Fatal(err)
		}
		got, ok, err := m.Backends.Lookup(3)
		if err != nil || !ok || got.ClusterID != 3 || got.ID != 3 {
			t.Fatalf("Lookup(3) = %+v %v %v, want cluster 3 with ID 3", got, ok, err)
		}
		if _, ok, _ := m.Backends.Lookup(3 + n); ok {
			t.Fatalf("Lookup(%d) found slot 3's backend, ID 3", 3+n)
		}
		err = m.Backends.Update(3+n, bpf.Backend{ClusterID: 11})
		for _, want := range []string{"lb_backends", "slot 3", "ID 3", "update 11"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("writing ID 11 over ID 3's slot: %v, want an error naming %q", err, want)
			}
		}
		if err := m.Backends.Delete(3 + n); err != nil {
			t.Fatal(err)
		}
		if got, ok, _ := m.Backends.Lookup(3); !ok || got.ClusterID != 3 {
			t.Fatalf("after the error and deleting stale ID 11, Lookup(3) = %+v %v, want the backend unchanged", got, ok)
		}
		if err := m.Backends.Update(3, bpf.Backend{ClusterID: 5, ID: 4}); err == nil {
			t.Fatal("writing ID 3 with a value naming ID 4 succeeded")
		}
		if err := m.Backends.Update(0, bpf.Backend{}); err == nil {
			t.Fatal("writing ID 0, the empty slot's, succeeded")
		}

		if err := m.Backends.BatchDelete([]uint32{3, 3}); err != nil {
			t.Fatal(err)
		}
		if err := m.Backends.Update(3+n, bpf.Backend{ClusterID: 11}); err != nil {
			t.Fatalf("ID 11 into slot 3 after ID 3 was deleted: %v", err)
		}
		entries := map[uint32]uint32{}
		if err := m.Backends.Iterate(func(id uint32, b bpf.Backend) bool {
			entries[id] = b.ClusterID
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if want := map[uint32]uint32{4: 4, 3 + n: 11}; !maps.Equal(entries, want) {
			t.Fatalf("Iterate yielded %v, want %v (non-empty slots by ID)", entries, want)
		}
		if _, ok, _ := m.Backends.Lookup(3); ok {
			t.Fatal("Lookup(3) found ID 11's backend")
		}
	})
}

// Count of a dense ID map counts its live IDs, as Iterate yields them,
// whether it learnt the slots from writes or by reading them.
func TestDenseIDMapCountAgreesWithIterate(t *testing.T) {
	implementations(t, smallConfig(), func(t *testing.T, m *bpf.Maps) {
		iterated := func() int {
			n := 0
			if err := m.RevNat.Iterate(func(uint32, bpf.RevNatValue) bool { n++; return true }); err != nil {
				t.Fatal(err)
			}
			return n
		}
		for _, step := range []func() error{
			func() error { return m.RevNat.BatchUpdate([]uint32{1, 2, 3}, make([]bpf.RevNatValue, 3)) },
			func() error { return m.RevNat.BatchDelete([]uint32{2, 2, 7}) },
			func() error { return m.RevNat.Update(2, bpf.RevNatValue{}) },
			func() error { return m.RevNat.Update(3, bpf.RevNatValue{}) }, // rewrites ID 3
		} {
			if err := step(); err != nil {
				t.Fatal(err)
			}
			n, err := bpf.Count(m.RevNat)
			if err != nil || n != iterated() {
				t.Fatalf("Count = %d, %v; Iterate yields %d", n, err, iterated())
			}
		}
	})
}
