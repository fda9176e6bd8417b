package bpf

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
)

// Faults injects failures into in-memory maps: each mutating operation
// (and each element of a batch) fails with probability Probability. A nil
// *Faults injects none.
type Faults struct {
	mu          sync.Mutex
	probability float64
	rng         *rand.Rand
	injected    int
}

// Injected returns how many failures have been injected.
func (f *Faults) Injected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected
}

// NewFaults returns a fault injector with a fixed seed, so failures repeat.
func NewFaults(probability float64, seed uint64) *Faults {
	return &Faults{probability: probability, rng: rand.New(rand.NewPCG(seed, seed^0x5eed))}
}

// SetProbability changes the failure probability (0 stops the faults).
func (f *Faults) SetProbability(p float64) {
	f.mu.Lock()
	f.probability = p
	f.mu.Unlock()
}

func (f *Faults) fail(mapName, op string) error {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.probability > 0 && f.rng.Float64() < f.probability {
		f.injected++
		return fmt.Errorf("%s: %s: injected fault", mapName, op)
	}
	return nil
}

// NewMemoryMaps returns in-memory maps with the capacities of cfg and the
// semantics of the kernel maps. faults may be nil.
func NewMemoryMaps(cfg Config, faults *Faults) (*Maps, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Maps{
		Kind:         "memory",
		Services:     newMemMap[ServiceKey, ServiceValue]("lb_services", cfg.LBServicesMax, false, faults),
		Backends:     newMemMap[uint32, Backend]("lb_backends", cfg.LBBackendsMax, false, faults),
		RevNat:       newMemMap[uint32, RevNatValue]("lb_rev_nat", cfg.LBRevNatMax, false, faults),
		Maglev:       &memMaglev{m: newMemMap[uint32, []uint32]("lb_maglev", cfg.LBMaglevMax, false, faults), size: int(cfg.LBMaglevTableSize)},
		Affinity:     newMemMap[AffinityKey, AffinityValue]("lb_affinity", cfg.LBAffinityMax, true, faults),
		SourceRanges: &memLPM{newMemMap[SourceRangeKey, uint8]("lb_src_range", cfg.LBSourceRangesMax, false, faults)},
		IDMarks:      newMemMap[uint32, uint32]("lb_id_marks", 2, false, faults),
	}, nil
}

type memMap[K comparable, V any] struct {
	name     string
	capacity int
	lru      bool
	faults   *Faults
	mu       sync.RWMutex
	entries  map[K]V
}

func newMemMap[K comparable, V any](name string, capacity uint32, lru bool, faults *Faults) *memMap[K, V] {
	return &memMap[K, V]{name: name, capacity: int(capacity), lru: lru, faults: faults, entries: map[K]V{}}
}

func (m *memMap[K, V]) Name() string { return m.name }

func (m *memMap[K, V]) Lookup(k K) (V, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	v, ok := m.entries[k]
	return v, ok, nil
}

func (m *memMap[K, V]) Update(k K, v V) error {
	if err := m.faults.fail(m.name, "update"); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.updateLocked(k, v)
}

func (m *memMap[K, V]) updateLocked(k K, v V) error {
	if _, exists := m.entries[k]; !exists && len(m.entries) >= m.capacity {
		if !m.lru {
			return fmt.Errorf("%s: update: %w (%d entries)", m.name, ErrMapFull, m.capacity)
		}
		for old := range m.entries { // evict one, as an LRU map would
			delete(m.entries, old)
			break
		}
	}
	m.entries[k] = v
	return nil
}

func (m *memMap[K, V]) Delete(k K) error {
	if err := m.faults.fail(m.name, "delete"); err != nil {
		return err
	}
	m.mu.Lock()
	delete(m.entries, k)
	m.mu.Unlock()
	return nil
}

func (m *memMap[K, V]) BatchUpdate(ks []K, vs []V) error {
	if len(ks) != len(vs) {
		return fmt.Errorf("%s: batch update: %d keys but %d values", m.name, len(ks), len(vs))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range ks {
		if err := m.faults.fail(m.name, "batch update"); err != nil {
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
	for _, k := range ks {
		if err := m.faults.fail(m.name, "batch delete"); err != nil {
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

// memLPM is the in-memory lb_src_range: Lookup finds the longest stored
// prefix containing the key, as the kernel's LPM trie does.
type memLPM struct {
	*memMap[SourceRangeKey, uint8]
}

func (m *memLPM) Lookup(k SourceRangeKey) (uint8, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var (
		best  uint8
		found bool
		bits  uint32
	)
	want := k.Prefix()
	for e, v := range m.entries {
		p := e.Prefix()
		if e.RevNatID == k.RevNatID && e.PrefixLen <= k.PrefixLen && p.Contains(want.Addr()) && (!found || e.PrefixLen > bits) {
			best, found, bits = v, true, e.PrefixLen
		}
	}
	return best, found, nil
}
