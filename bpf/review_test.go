package bpf_test

// Regression tests from a review of the maps. Each test's comment
// describes the bug it caught (fixed since).

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
)

// Map's contract: "Update of a new key fails when the map is full (an LRU
// map evicts instead) ... and errors name the map", the same for kernel
// and memory. Every non-LRU map must report ErrMapFull.
func TestReviewFullMapsReportErrMapFull(t *testing.T) {
	cfg := smallConfig()
	cfg.LBSourceRangesMax = 2
	cfg.LBMaglevMax = 1
	implementations(t, cfg, func(t *testing.T, m *bpf.Maps) {
		for i, p := range []string{"10.0.0.0/8", "192.168.0.0/16"} {
			if err := m.SourceRanges.Update(bpf.NewSourceRangeKey(uint32(i+1), mustPrefix(p)), 1); err != nil {
				t.Fatal(err)
			}
		}
		err := m.SourceRanges.Update(bpf.NewSourceRangeKey(3, mustPrefix("172.16.0.0/12")), 1)
		if !errors.Is(err, bpf.ErrMapFull) || !strings.Contains(err.Error(), "lb_src_range") {
			t.Errorf("3rd source range in a map of 2: %v, want ErrMapFull naming lb_src_range", err)
		}
		table := make([]uint32, m.Maglev.TableSize())
		if err := m.Maglev.Update(1, table); err != nil {
			t.Fatal(err)
		}
		err = m.Maglev.Update(2, table)
		if !errors.Is(err, bpf.ErrMapFull) || !strings.Contains(err.Error(), "lb_maglev") {
			t.Errorf("2nd Maglev table in a map of 1: %v, want ErrMapFull naming lb_maglev", err)
		}
	})
}

// Changing --lb-maglev-table-size while the pinned lb_maglev is empty:
// NewKernelMaps accepts the pinned map (checkInnerMaps has no inner map to
// look at), but the outer map's inner template still has the old value
// size, so every Maglev update fails from then on, and
// --lb-recreate-maps does not help because no incompatibility is
// reported.
func TestReviewMaglevTableSizeChangeWithEmptyPinnedMap(t *testing.T) {
	cfg := smallConfig()
	cfg.LBPinDir = bpftest.Config(t).LBPinDir
	m, err := bpf.NewKernelMaps(cfg) // 251, no table written
	if err != nil {
		t.Fatal(err)
	}
	m.Close()

	changed := cfg
	changed.LBMaglevTableSize = 509
	m2, err := bpf.NewKernelMaps(changed)
	if err != nil {
		// Reporting the incompatibility would be fine too.
		if !strings.Contains(err.Error(), "--lb-recreate-maps") {
			t.Fatalf("reopen with another table size: %v", err)
		}
		return
	}
	defer m2.Close()
	if err := m2.Maglev.Update(1, make([]uint32, 509)); err != nil {
		t.Fatalf("the maps opened with table size 509, but a 509-slot table cannot be written: %v", err)
	}
}

// TakeDump (and with it lb/maps-cmp, and Prune's Maglev iteration) must
// work while Maglev tables are swapped: the memory maps never fail; the
// kernel's Iterate (and Lookup) read an inner map ID and then open the map
// by ID, and the replaced inner map may be gone by then (ENOENT). Racy:
// fails within seconds in practice.
func TestReviewDumpDuringMaglevSwaps(t *testing.T) {
	implementations(t, smallConfig(), func(t *testing.T, m *bpf.Maps) {
		var stop atomic.Bool
		var wg sync.WaitGroup
		for g := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				table := make([]uint32, m.Maglev.TableSize())
				for i := uint32(0); !stop.Load(); i++ {
					table[0] = i
					if err := m.Maglev.Update(1+uint32(g), table); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		defer func() { stop.Store(true); wg.Wait() }()
		deadline := time.Now().Add(3 * time.Second)
		n := 0
		for ; time.Now().Before(deadline); n++ {
			if err := m.Maglev.Iterate(func(uint32, []uint32) bool { return true }); err != nil {
				t.Fatalf("Maglev.Iterate %d during Maglev updates: %v", n, err)
			}
			if _, _, err := m.Maglev.Lookup(1); err != nil {
				t.Fatalf("Maglev.Lookup %d during Maglev updates: %v", n, err)
			}
			if n%16 == 0 {
				if _, err := bpf.TakeDump(m); err != nil {
					t.Fatalf("TakeDump %d during Maglev updates: %v", n, err)
				}
			}
		}
		t.Logf("%d rounds without error", n)
	})
}

var _ = netip.Prefix{}

// lb_src_range is an LPM trie: Lookup returns the longest stored prefix
// that contains the key, in the kernel and in memory alike.
func TestSourceRangeLookupIsLongestPrefixInBoth(t *testing.T) {
	implementations(t, smallConfig(), func(t *testing.T, m *bpf.Maps) {
		if err := m.SourceRanges.Update(bpf.NewSourceRangeKey(1, mustPrefix("10.0.0.0/8")), 1); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := m.SourceRanges.Lookup(bpf.NewSourceRangeKey(1, mustPrefix("10.1.0.0/16"))); !ok || err != nil {
			t.Errorf("Lookup(1, 10.1.0.0/16) with 10.0.0.0/8 stored: found=%v err=%v, want found", ok, err)
		}
		for _, miss := range []bpf.SourceRangeKey{bpf.NewSourceRangeKey(2, mustPrefix("10.1.0.0/16")), bpf.NewSourceRangeKey(1, mustPrefix("11.0.0.0/16"))} {
			if _, ok, _ := m.SourceRanges.Lookup(miss); ok {
				t.Errorf("Lookup(%d, %s) found a range of another frontend or address", miss.RevNatID, miss.Prefix())
			}
		}
		// Batch delete on the trie (no kernel batch support), with a missing key.
		keys := []bpf.SourceRangeKey{bpf.NewSourceRangeKey(1, mustPrefix("10.0.0.0/8")), bpf.NewSourceRangeKey(1, mustPrefix("10.9.0.0/16"))}
		if err := m.SourceRanges.BatchDelete(keys); err != nil {
			t.Errorf("BatchDelete: %v", err)
		}
	})
}

// --lb-maps auto falls back to in-memory maps when the process "cannot
// create" kernel maps; but it also falls back when the pinned maps exist
// and merely have another layout, which without --lb-recreate-maps is
// meant to be "an error that says so". The agent then runs on in-memory
// maps (only an Info log line), programming no datapath at all.
func TestReviewAutoModeDoesNotHideIncompatibleMaps(t *testing.T) {
	cfg := smallConfig()
	cfg.LBPinDir = bpftest.Config(t).LBPinDir
	m, err := bpf.NewKernelMaps(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()

	changed := cfg
	changed.LBServicesMax = cfg.LBServicesMax * 2 // another layout
	var got *bpf.Maps
	h := hive.New(
		bpf.Cell,
		cell.Invoke(func(m *bpf.Maps) { got = m }),
	)
	hive.AddConfigOverride(h, func(c *bpf.Config) { *c = changed })
	log := hivetest.Logger(t)
	if err := h.Populate(log); err != nil {
		if !strings.Contains(err.Error(), "--lb-recreate-maps") {
			t.Fatalf("populate: %v", err)
		}
		return // the error that says so
	}
	defer h.Stop(log, context.Background())
	if got.Kind != "kernel" {
		t.Fatalf("pinned maps of another layout silently gave %s maps instead of an error", got.Kind)
	}
}
