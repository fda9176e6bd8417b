package bpf_test

import (
	"testing"

	"github.com/lbstate/lbstate/bpf"
)

// lb_src_range is an LPM trie: Lookup returns the longest stored prefix
// that contains the key's address, for the key's frontend only, in the
// kernel and in memory alike.
func TestSourceRangeLookupFindsLongestPrefixOfTheSameFrontend(t *testing.T) {
	implementations(t, smallConfig(), func(t *testing.T, m *bpf.Maps) {
		if err := m.SourceRanges.Update(bpf.NewSourceRangeKey(1, mustPrefix("10.0.0.0/8")), 1); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := m.SourceRanges.Lookup(bpf.NewSourceRangeKey(1, mustPrefix("10.0.0.0/8"))); !ok {
			t.Error("the stored range itself was not found")
		}
		if _, ok, err := m.SourceRanges.Lookup(bpf.NewSourceRangeKey(1, mustPrefix("10.1.0.0/16"))); !ok || err != nil {
			t.Errorf("Lookup(1, 10.1.0.0/16) with 10.0.0.0/8 stored: found=%v err=%v, want found", ok, err)
		}
		if err := m.SourceRanges.Update(bpf.NewSourceRangeKey(1, mustPrefix("10.1.0.0/16")), 2); err != nil {
			t.Fatal(err)
		}
		if v, ok, err := m.SourceRanges.Lookup(bpf.NewSourceRangeKey(1, mustPrefix("10.1.2.0/24"))); !ok || err != nil || v != 2 {
			t.Errorf("Lookup(1, 10.1.2.0/24): %d found=%v err=%v, want 2 from 10.1.0.0/16", v, ok, err)
		}
		if v, ok, err := m.SourceRanges.Lookup(bpf.NewSourceRangeKey(1, mustPrefix("10.2.0.0/16"))); !ok || err != nil || v != 1 {
			t.Errorf("Lookup(1, 10.2.0.0/16): %d found=%v err=%v, want 1 from 10.0.0.0/8", v, ok, err)
		}
		for _, miss := range []bpf.SourceRangeKey{bpf.NewSourceRangeKey(2, mustPrefix("10.1.0.0/16")), bpf.NewSourceRangeKey(1, mustPrefix("11.0.0.0/16"))} {
			if _, ok, _ := m.SourceRanges.Lookup(miss); ok {
				t.Errorf("Lookup(%d, %s) found a range of another frontend or address", miss.RevNatID, miss.Prefix())
			}
		}
	})
}
