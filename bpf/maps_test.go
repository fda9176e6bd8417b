package bpf_test

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// implementations runs fn against in-memory maps and kernel maps with the
// same configuration.
func implementations(t *testing.T, cfg bpf.Config, fn func(t *testing.T, m *bpf.Maps)) {
	t.Run("memory", func(t *testing.T) {
		m, err := bpf.NewMemoryMaps(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		fn(t, m)
	})
	t.Run("kernel", func(t *testing.T) {
		kcfg := bpftest.Config(t)
		cfg.LBPinDir = kcfg.LBPinDir
		fn(t, bpftest.KernelMaps(t, cfg))
	})
}

func smallConfig() bpf.Config {
	cfg := bpf.DefaultConfig
	cfg.LBServicesMax, cfg.LBBackendsMax, cfg.LBAffinityMax = 64, 8, 4
	cfg.LBMaglevTableSize = 251
	return cfg
}

func TestMapSemantics(t *testing.T) {
	implementations(t, smallConfig(), func(t *testing.T, m *bpf.Maps) {
		fe := lb.MustParseL3n4Addr("10.96.0.1:80/TCP")
		k := bpf.NewServiceKey(fe, 0)
		v := bpf.ServiceValue{RevNatID: 7, Count: 2, Type: 1}
		if err := m.Services.Update(k, v); err != nil {
			t.Fatal(err)
		}
		got, ok, err := m.Services.Lookup(k)
		if err != nil || !ok || got != v {
			t.Fatalf("Lookup: %+v %v %v, want %+v", got, ok, err, v)
		}
		if _, ok, _ := m.Services.Lookup(bpf.NewServiceKey(fe, 1)); ok {
			t.Fatal("found a key never written")
		}
		if err := m.Services.Delete(k); err != nil {
			t.Fatal(err)
		}
		if err := m.Services.Delete(k); err != nil {
			t.Fatalf("deleting a missing key: %v", err)
		}

		// Capacity: lb_backends holds 8; updating an existing key still works.
		for id := uint32(1); id <= 8; id++ {
			if err := m.Backends.Update(id, bpf.Backend{ClusterID: id}); err != nil {
				t.Fatalf("backend %d: %v", id, err)
			}
		}
		err = m.Backends.Update(9, bpf.Backend{})
		if !errors.Is(err, bpf.ErrMapFull) || !strings.Contains(err.Error(), "lb_backends") {
			t.Fatalf("9th backend: %v, want ErrMapFull naming lb_backends", err)
		}
		if err := m.Backends.Update(3, bpf.Backend{ClusterID: 33}); err != nil {
			t.Fatalf("updating an existing key of a full map: %v", err)
		}

		// Batches, with missing keys in the delete.
		keys := []uint32{100, 101, 102}
		vals := []bpf.RevNatValue{bpf.NewRevNatValue(fe), bpf.NewRevNatValue(fe.WithPort(81)), bpf.NewRevNatValue(fe.WithPort(82))}
		if err := m.RevNat.BatchUpdate(keys, vals); err != nil {
			t.Fatal(err)
		}
		var seen []uint32
		if err := m.RevNat.Iterate(func(id uint32, v bpf.RevNatValue) bool {
			seen = append(seen, id)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		slices.Sort(seen)
		if !slices.Equal(seen, keys) {
			t.Fatalf("iterated %v, want %v", seen, keys)
		}
		if err := m.RevNat.BatchDelete([]uint32{100, 555, 102, 556}); err != nil {
			t.Fatalf("batch delete with missing keys: %v", err)
		}
		if _, ok, _ := m.RevNat.Lookup(100); ok {
			t.Error("100 survived the batch delete")
		}
		if _, ok, _ := m.RevNat.Lookup(101); !ok {
			t.Error("101 was deleted but not asked for")
		}
		if _, ok, _ := m.RevNat.Lookup(102); ok {
			t.Error("102, after a missing key in the batch, survived")
		}

		// LRU: a full affinity map evicts instead of failing.
		for i := range 10 {
			if err := m.Affinity.Update(bpf.AffinityKey{RevNatID: uint32(i)}, bpf.AffinityValue{BackendID: 1}); err != nil {
				t.Fatalf("affinity %d: %v", i, err)
			}
		}

		// Source ranges.
		srk := bpf.NewSourceRangeKey(7, mustPrefix("10.0.0.0/8"))
		if err := m.SourceRanges.Update(srk, 1); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := m.SourceRanges.Lookup(srk); !ok {
			t.Error("source range not found")
		}
	})
}

func TestMaglevMap(t *testing.T) {
	implementations(t, smallConfig(), func(t *testing.T, m *bpf.Maps) {
		table := make([]uint32, m.Maglev.TableSize())
		for i := range table {
			table[i] = uint32(i%3 + 1)
		}
		if err := m.Maglev.Update(5, table); err != nil {
			t.Fatal(err)
		}
		got, ok, err := m.Maglev.Lookup(5)
		if err != nil || !ok || !slices.Equal(got, table) {
			t.Fatalf("Lookup: ok=%v err=%v equal=%v", ok, err, slices.Equal(got, table))
		}
		table[0] = 9 // the map keeps its own copy
		if got, _, _ := m.Maglev.Lookup(5); got[0] == 9 {
			t.Fatal("the map shares the caller's table")
		}
		if err := m.Maglev.Update(5, table); err != nil {
			t.Fatal(err)
		}
		if got, _, _ := m.Maglev.Lookup(5); got[0] != 9 {
			t.Fatal("the table was not replaced")
		}
		if err := m.Maglev.Update(6, table[:10]); err == nil || !strings.Contains(err.Error(), "table has 10 slots, want 251") {
			t.Fatalf("short table: %v", err)
		}
		n := 0
		m.Maglev.Iterate(func(id uint32, tbl []uint32) bool { n++; return true })
		if n != 1 {
			t.Fatalf("iterated %d tables, want 1", n)
		}
		if err := m.Maglev.Delete(5); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := m.Maglev.Lookup(5); ok {
			t.Fatal("table survived delete")
		}
	})
}

// A restarted agent finds the pinned entries; a layout change is an error
// that says what to do, or a recreation when allowed.
func TestKernelMapsReopen(t *testing.T) {
	cfg := smallConfig()
	cfg.LBPinDir = bpftest.Config(t).LBPinDir
	m, err := bpf.NewKernelMaps(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Backends.Update(1, bpf.Backend{ClusterID: 42}); err != nil {
		t.Fatal(err)
	}
	if err := m.Maglev.Update(1, make([]uint32, cfg.LBMaglevTableSize)); err != nil {
		t.Fatal(err)
	}
	m.Close()
	for _, name := range []string{"lb_services", "lb_backends", "lb_maglev"} {
		if _, err := os.Stat(filepath.Join(cfg.LBPinDir, name)); err != nil {
			t.Fatalf("%s not pinned: %v", name, err)
		}
	}

	m = bpftest.KernelMaps(t, cfg)
	if v, ok, _ := m.Backends.Lookup(1); !ok || v.ClusterID != 42 {
		t.Fatalf("backend 1 after reopening: %+v %v", v, ok)
	}
	m.Close()

	changed := cfg
	changed.LBMaglevTableSize = 509
	if _, err := bpf.NewKernelMaps(changed); err == nil || !strings.Contains(err.Error(), "--lb-recreate-maps") {
		t.Fatalf("changed Maglev size: %v, want an error pointing at --lb-recreate-maps", err)
	}
	changed.LBRecreateMaps = true
	m = bpftest.KernelMaps(t, changed)
	if _, ok, _ := m.Maglev.Lookup(1); ok {
		t.Fatal("recreated lb_maglev kept an old table")
	}
	if v, ok, _ := m.Backends.Lookup(1); !ok || v.ClusterID != 42 {
		t.Fatal("recreating lb_maglev lost lb_backends' entries")
	}
}

func TestFaultInjection(t *testing.T) {
	faults := bpftest.NewFaults(0.5, 1)
	m, err := bpf.NewMemoryMaps(smallConfig(), faults)
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for i := range 100 {
		if m.RevNat.Update(uint32(i%8), bpf.RevNatValue{}) != nil {
			failed++
		}
	}
	if failed < 30 || failed > 70 {
		t.Fatalf("%d of 100 updates failed at p=0.5", failed)
	}
	faults.SetProbability(0)
	for i := range 100 {
		if err := m.RevNat.Update(uint32(i%8), bpf.RevNatValue{}); err != nil {
			t.Fatal(err)
		}
	}
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }
