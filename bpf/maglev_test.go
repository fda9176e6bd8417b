package bpf_test

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lbstate/lbstate/bpf"
)

// A Maglev table is stored as a copy of the caller's, replaced and deleted
// whole, and must have the configured size.
func TestMaglevTablesAreCopiedReplacedAndDeletedWhole(t *testing.T) {
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

// Reading Maglev tables (Iterate, Lookup, and TakeDump, which lb/maps-cmp
// and the reconciler's pruning use) succeeds while tables are being
// replaced. Once, kernel reads failed: they read an inner map's ID, then
// opened the map by ID, and a replaced inner map could be gone by then
// (ENOENT). The race showed within seconds.
func TestMaglevReadsSucceedDuringTableSwaps(t *testing.T) {
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
