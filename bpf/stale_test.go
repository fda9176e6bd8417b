package bpf_test

import (
	"testing"

	"github.com/lbstate/lbstate/bpf"
)

// plainMap hides every method of a map but bpf.Map's: a wrapper that
// does not pass LookupAndDelete or Create on.
type plainMap[K comparable, V any] struct{ bpf.Map[K, V] }

// DeleteStale deletes the entries a walk judged stale that still are, and
// keeps one written again since with a value that is not (the datapath
// pinning a client again), on kernel and in-memory maps, and through a
// wrapper that hides LookupAndDelete (read, then deleted at once).
func TestDeleteStaleKeepsAnEntryWrittenAgainSinceTheWalk(t *testing.T) {
	implementations(t, smallConfig(), func(t *testing.T, m *bpf.Maps) {
		for name, pins := range map[string]bpf.Map[bpf.AffinityKey, bpf.AffinityValue]{
			"the map": m.Affinity, "a wrapper": plainMap[bpf.AffinityKey, bpf.AffinityValue]{m.Affinity},
		} {
			keys := []bpf.AffinityKey{{RevNatID: 1}, {RevNatID: 2}, {RevNatID: 3}}
			for _, k := range keys {
				if err := pins.Update(k, bpf.AffinityValue{BackendID: 7}); err != nil {
					t.Fatal(err)
				}
			}
			// After the walk: 2 pinned again, to another backend.
			if err := pins.Update(keys[1], bpf.AffinityValue{BackendID: 8}); err != nil {
				t.Fatal(err)
			}
			n, err := bpf.DeleteStale(pins, append(keys, bpf.AffinityKey{RevNatID: 4}), func(_ bpf.AffinityKey, v bpf.AffinityValue) bool {
				return v.BackendID == 7
			})
			if err != nil {
				t.Fatal(err)
			}
			if n != 2 {
				t.Errorf("%s: %d entries deleted, want 2", name, n)
			}
			for i, k := range keys {
				v, ok, err := pins.Lookup(k)
				if err != nil {
					t.Fatal(err)
				}
				if want := i == 1; ok != want || ok && v.BackendID != 8 {
					t.Errorf("%s: entry %d: %+v (held %v), want held %v (backend 8)", name, k.RevNatID, v, ok, want)
				}
			}
			if err := pins.Delete(keys[1]); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// rewriting is a map whose LookupAndDelete of key, once, is followed at
// once by write: the datapath writing the key between DeleteStale's
// deletion and its write back.
type rewriting[K comparable, V any] struct {
	bpf.Map[K, V]
	key   K
	write func()
}

func (m *rewriting[K, V]) LookupAndDelete(k K) (V, bool, error) {
	v, ok, err := bpf.LookupAndDelete(m.Map, k)
	if k == m.key && m.write != nil {
		m.write()
		m.write = nil
	}
	return v, ok, err
}

func (m *rewriting[K, V]) Create(k K, v V) error {
	if created, err := bpf.CreateEntry(m.Map, k, v); err != nil || created {
		return err
	}
	return bpf.ErrExists
}

// An entry the datapath writes between DeleteStale's deletion of a live
// entry and its write back stays, and the write back does not replace
// it: it is newer (a new flow's, or a pin made in that instant).
func TestDeleteStaleKeepsWhatTheDatapathWroteBeforeItsWriteBack(t *testing.T) {
	implementations(t, smallConfig(), func(t *testing.T, m *bpf.Maps) {
		k := bpf.AffinityKey{RevNatID: 1}
		if err := m.Affinity.Update(k, bpf.AffinityValue{BackendID: 8}); err != nil {
			t.Fatal(err)
		}
		newer := bpf.AffinityValue{BackendID: 9, LastUsed: 5}
		pins := &rewriting[bpf.AffinityKey, bpf.AffinityValue]{Map: m.Affinity, key: k, write: func() {
			if err := m.Affinity.Update(k, newer); err != nil {
				t.Error(err)
			}
		}}
		n, err := bpf.DeleteStale(pins, []bpf.AffinityKey{k}, func(_ bpf.AffinityKey, v bpf.AffinityValue) bool { return v.BackendID == 7 })
		if err != nil {
			t.Fatal(err)
		}
		if pins.write != nil {
			t.Fatal("DeleteStale did not delete the entry")
		}
		if v, ok, err := m.Affinity.Lookup(k); err != nil || !ok || v != newer || n != 0 {
			t.Errorf("the entry is %+v (held %v, %v), %d deleted; want the datapath's newer %+v, none deleted", v, ok, err, n, newer)
		}
	})
}
