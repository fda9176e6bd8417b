package bpf_test

import (
	"slices"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// BatchDelete deletes the keys asked for and steps over missing ones
// (where the kernel's batch stops at the first missing key).
func TestBatchDeleteStepsOverMissingKeys(t *testing.T) {
	implementations(t, smallConfig(), func(t *testing.T, m *bpf.Maps) {
		fe := lb.MustParseL3n4Addr("10.96.0.1:80/TCP")
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
	})
}

// The kernel has no batch operations for LPM tries; batches on them fall
// back to one operation per key, missing keys included.
func TestBatchDeleteWorksOnTrieWithoutKernelBatchSupport(t *testing.T) {
	implementations(t, smallConfig(), func(t *testing.T, m *bpf.Maps) {
		stored := bpf.NewSourceRangeKey(1, mustPrefix("10.0.0.0/8"))
		if err := m.SourceRanges.Update(stored, 1); err != nil {
			t.Fatal(err)
		}
		keys := []bpf.SourceRangeKey{stored, bpf.NewSourceRangeKey(1, mustPrefix("10.9.0.0/16"))}
		if err := m.SourceRanges.BatchDelete(keys); err != nil {
			t.Errorf("BatchDelete: %v", err)
		}
		if _, ok, _ := m.SourceRanges.Lookup(stored); ok {
			t.Error("10.0.0.0/8 survived the batch delete")
		}
	})
}
