package bpf

import (
	"fmt"
	"slices"
	"sync"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// FaultHook lets a test make in-memory maps fail. Before each mutating
// operation (Update, Delete, LookupAndDelete, and each element of
// BatchUpdate and BatchDelete) a map calls Fail with its name and the
// operation ("update", "delete" (also for LookupAndDelete), "batch
// update" or "batch delete"); a non-nil error is returned
// by that operation and changes nothing more (a batch keeps the elements
// before it, as a kernel batch may). Lookups and iterations never fail.
// bpftest.Faults fails at random. Kernel maps take no hook.
type FaultHook interface {
	Fail(mapName, op string) error
}

// NewMemoryMaps returns in-memory maps with the capacities of cfg and the
// semantics of the kernel maps (see the package documentation). faults may
// be nil.
func NewMemoryMaps(cfg Config, faults FaultHook) (*Maps, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	maps := &Maps{Kind: "memory"}
	for i := range layout {
		d := &layout[i]
		d.bind.memory(maps, d, cfg, faults)
		maps.setCapacity(d, d.maxEntries(cfg))
	}
	return maps, nil
}

// memMap is an in-memory hash map, LRU or not.
type memMap[K comparable, V any] struct {
	name     string
	capacity int
	lru      bool
	faults   FaultHook
	mu       sync.RWMutex
	entries  map[K]V
	peak     int // the most entries since entries was made (compactLocked)
}

func newMemMap[K comparable, V any](d *mapDef, cfg Config, faults FaultHook) *memMap[K, V] {
	return &memMap[K, V]{
		name: d.name, capacity: int(d.maxEntries(cfg)), lru: d.typ == ebpf.LRUHash,
		faults: faults, entries: map[K]V{},
	}
}

// fail asks the fault hook whether op fails.
func (m *memMap[K, V]) fail(op string) error {
	if m.faults == nil {
		return nil
	}
	return m.faults.Fail(m.name, op)
}

func (m *memMap[K, V]) Name() string { return m.name }

func (m *memMap[K, V]) Lookup(k K) (V, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	v, ok := m.entries[k]
	return v, ok, nil
}

func (m *memMap[K, V]) Update(k K, v V) error {
	if err := m.fail("update"); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.updateLocked(k, v)
}

func (m *memMap[K, V]) updateLocked(k K, v V) error {
	if _, exists := m.entries[k]; !exists && len(m.entries) >= m.capacity {
		if !m.lru {
			return &MapFullError{Map: m.name, Op: "update", MaxEntries: m.capacity}
		}
		for old := range m.entries { // evict one, as an LRU map would
			delete(m.entries, old)
			break
		}
	}
	m.entries[k] = v
	m.peak = max(m.peak, len(m.entries))
	return nil
}

// compactLocked makes the Go map anew once it holds less than a quarter
// of its peak: a Go map keeps the room of its peak, which a kernel hash
// map gives back (a delete-all of 200,000 entries once kept 24 MB).
func (m *memMap[K, V]) compactLocked() {
	if m.peak < 1024 || 4*len(m.entries) >= m.peak {
		return
	}
	entries := make(map[K]V, len(m.entries)) // not maps.Clone, which copies the room too
	for k, v := range m.entries {
		entries[k] = v
	}
	m.entries, m.peak = entries, len(entries)
}

func (m *memMap[K, V]) Delete(k K) error {
	if err := m.fail("delete"); err != nil {
		return err
	}
	m.mu.Lock()
	delete(m.entries, k)
	m.compactLocked()
	m.mu.Unlock()
	return nil
}

// LookupAndDelete deletes k and returns the value it held, in one step,
// as a kernel map does.
func (m *memMap[K, V]) LookupAndDelete(k K) (V, bool, error) {
	if err := m.fail("delete"); err != nil {
		var v V
		return v, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.entries[k]
	delete(m.entries, k)
	m.compactLocked()
	return v, ok, nil
}

func (m *memMap[K, V]) BatchUpdate(ks []K, vs []V) error {
	if len(ks) != len(vs) {
		return fmt.Errorf("%s: batch update: %d keys but %d values", m.name, len(ks), len(vs))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range ks {
		if err := m.fail("batch update"); err != nil {
			return err
		}
		if err := m.updateLocked(ks[i], vs[i]); err != nil {
			return err
		}
	}
	return nil
}

func (m *memMap[K, V]) BatchDelete(ks []K) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.compactLocked()
	for _, k := range ks {
		if err := m.fail("batch delete"); err != nil {
			return err
		}
		delete(m.entries, k)
	}
	return nil
}

func (m *memMap[K, V]) Iterate(fn func(K, V) bool) error {
	m.mu.RLock()
	keys := make([]K, 0, len(m.entries))
	vals := make([]V, 0, len(m.entries))
	for k, v := range m.entries {
		keys = append(keys, k)
		vals = append(vals, v)
	}
	m.mu.RUnlock()
	for i := range keys {
		if !fn(keys[i], vals[i]) {
			break
		}
	}
	return nil
}

type memMaglev struct {
	m    *memMap[uint32, []uint32]
	size int
}

func (m *memMaglev) Name() string   { return m.m.name }
func (m *memMaglev) TableSize() int { return m.size }

func (m *memMaglev) Lookup(id uint32) ([]uint32, bool, error) { return m.m.Lookup(id) }

func (m *memMaglev) Update(id uint32, table []uint32) error {
	if len(table) != m.size {
		return fmt.Errorf("%s: update %d: table has %d slots, want %d", m.m.name, id, len(table), m.size)
	}
	return m.m.Update(id, slices.Clone(table))
}

func (m *memMaglev) Delete(id uint32) error { return m.m.Delete(id) }

func (m *memMaglev) Iterate(fn func(uint32, []uint32) bool) error { return m.m.Iterate(fn) }

// prefixKey is the key of an LPM trie: covers reports whether the prefix
// stored as k contains key, and the prefix's length.
type prefixKey[K any] interface {
	comparable
	covers(key K) (bits uint32, ok bool)
}

// memLPM is an in-memory LPM trie: Lookup finds the longest stored prefix
// that covers the key, as the kernel's does.
type memLPM[K prefixKey[K], V any] struct {
	*memMap[K, V]
}

func (m *memLPM[K, V]) Lookup(k K) (V, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var (
		best  V
		found bool
		most  uint32
	)
	for e, v := range m.entries {
		if bits, ok := e.covers(k); ok && (!found || bits > most) {
			best, found, most = v, true, bits
		}
	}
	return best, found, nil
}

// memArray is an in-memory array map: as in the kernel, every index below
// the capacity exists (zero until written), no index above it can be
// written, and nothing can be deleted.
type memArray[V any] struct {
	*memMap[uint32, V]
}

func (m *memArray[V]) Lookup(k uint32) (V, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	v := m.entries[k]
	return v, int(k) < m.capacity, nil
}

func (m *memArray[V]) Update(k uint32, v V) error {
	if err := m.inRange(k); err != nil {
		return err
	}
	return m.memMap.Update(k, v)
}

// BatchUpdate checks every index first; the kernel stops at the first one
// out of range instead, having applied those before it.
func (m *memArray[V]) BatchUpdate(ks []uint32, vs []V) error {
	for _, k := range ks {
		if err := m.inRange(k); err != nil {
			return err
		}
	}
	return m.memMap.BatchUpdate(ks, vs)
}

func (m *memArray[V]) inRange(k uint32) error {
	if int(k) >= m.capacity {
		return &MapFullError{Map: m.name, Op: fmt.Sprintf("update %d", k), MaxEntries: m.capacity}
	}
	return nil
}

func (m *memArray[V]) Delete(uint32) error {
	return fmt.Errorf("%s: delete: %w", m.name, unix.EINVAL)
}

func (m *memArray[V]) BatchDelete([]uint32) error {
	return fmt.Errorf("%s: batch delete: %w", m.name, unix.EINVAL)
}

func (m *memArray[V]) Iterate(fn func(uint32, V) bool) error {
	m.mu.RLock()
	vals := make([]V, m.capacity)
	for k, v := range m.entries {
		vals[k] = v
	}
	m.mu.RUnlock()
	for k, v := range vals {
		if !fn(uint32(k), v) {
			break
		}
	}
	return nil
}
