package reconciler

import (
	"iter"
	"sync/atomic"

	"github.com/lbstate/lbstate/bpf"
)

// Every entry the reconciler writes is churn under live traffic (a
// restart that rewrites what is there already is pure churn), so its
// writes are counted per map (lbstate_map_writes_total): an update or a
// deletion of one entry counts one, a Maglev table one, whether or not
// the kernel then applied it.

// mapWrites counts the entries written to each map, by map name.
type mapWrites struct {
	byMap map[string]*atomic.Uint64
}

// countWrites returns a copy of maps whose writable maps count, in w,
// every entry they are asked to update or delete. Reads go straight
// through.
func countWrites(maps *bpf.Maps, w *mapWrites) *bpf.Maps {
	counted := *maps
	w.byMap = map[string]*atomic.Uint64{}
	counter := func(name string) *atomic.Uint64 {
		n := &atomic.Uint64{}
		w.byMap[name] = n
		return n
	}
	counted.Services = countedMap[bpf.ServiceKey, bpf.ServiceValue]{maps.Services, counter(maps.Services.Name())}
	counted.Backends = countedMap[uint32, bpf.Backend]{maps.Backends, counter(maps.Backends.Name())}
	counted.RevNat = countedMap[uint32, bpf.RevNatValue]{maps.RevNat, counter(maps.RevNat.Name())}
	counted.Affinity = countedMap[bpf.AffinityKey, bpf.AffinityValue]{maps.Affinity, counter(maps.Affinity.Name())}
	counted.SourceRanges = countedMap[bpf.SourceRangeKey, uint8]{maps.SourceRanges, counter(maps.SourceRanges.Name())}
	counted.IDMarks = countedMap[uint32, uint32]{maps.IDMarks, counter(maps.IDMarks.Name())}
	counted.Maglev = countedMaglev{maps.Maglev, counter(maps.Maglev.Name())}
	return &counted
}

// all yields each map's name and the entries written to it so far.
func (w *mapWrites) all() func(func(string, uint64) bool) {
	return func(yield func(string, uint64) bool) {
		for name, n := range w.byMap {
			if !yield(name, n.Load()) {
				return
			}
		}
	}
}

// countedMap is a bpf.Map whose writes are counted in n.
type countedMap[K comparable, V any] struct {
	bpf.Map[K, V]
	n *atomic.Uint64
}

// Count keeps the map's own count (bpf.Count), which a dense ID map
// answers without reading the kernel.
func (m countedMap[K, V]) Count() (int, error) { return bpf.Count(m.Map) }

func (m countedMap[K, V]) Update(k K, v V) error {
	m.n.Add(1)
	return m.Map.Update(k, v)
}

func (m countedMap[K, V]) Delete(k K) error {
	m.n.Add(1)
	return m.Map.Delete(k)
}

func (m countedMap[K, V]) BatchUpdate(ks []K, vs []V) error {
	m.n.Add(uint64(len(ks)))
	return m.Map.BatchUpdate(ks, vs)
}

func (m countedMap[K, V]) BatchDelete(ks []K) error {
	m.n.Add(uint64(len(ks)))
	return m.Map.BatchDelete(ks)
}

// LookupAndDelete passes the deletion on in one step with its read, if
// the map can (bpf.DeleteStale).
func (m countedMap[K, V]) LookupAndDelete(k K) (V, bool, error) {
	m.n.Add(1)
	return bpf.LookupAndDelete(m.Map, k)
}

// Create adds k, v unless the map holds k (bpf.ErrExists): a write
// back of bpf.DeleteStale's, which leaves the datapath's own standing.
func (m countedMap[K, V]) Create(k K, v V) error {
	m.n.Add(1)
	created, err := bpf.CreateEntry(m.Map, k, v)
	if err == nil && !created {
		return bpf.ErrExists
	}
	return err
}

// BatchDeleteHolding passes the values on (bpf.DeleteHolding).
func (m countedMap[K, V]) BatchDeleteHolding(ks []K, vs []V) error {
	m.n.Add(uint64(len(ks)))
	if d, ok := m.Map.(interface{ BatchDeleteHolding([]K, []V) error }); ok {
		return d.BatchDeleteHolding(ks, vs)
	}
	return m.Map.BatchDelete(ks)
}

// MarkSlotsUsed passes the IDs on (bpf.MarkSlotsUsed); it writes nothing.
func (m countedMap[K, V]) MarkSlotsUsed(ids iter.Seq[uint32]) error {
	if u, ok := m.Map.(interface{ MarkSlotsUsed(iter.Seq[uint32]) error }); ok {
		return u.MarkSlotsUsed(ids)
	}
	return nil
}

// countedMaglev is a bpf.MaglevMap whose writes (a table each) are
// counted in n.
type countedMaglev struct {
	bpf.MaglevMap
	n *atomic.Uint64
}

func (m countedMaglev) Update(id uint32, table []uint32) error {
	m.n.Add(1)
	return m.MaglevMap.Update(id, table)
}

func (m countedMaglev) Delete(id uint32) error {
	m.n.Add(1)
	return m.MaglevMap.Delete(id)
}
