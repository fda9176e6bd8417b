package bpf

import (
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
)

// A dense ID map (lb_backends, lb_rev_nat) is an array in which ID id
// lives in slot id % max_entries, its value repeating the ID (0: an empty
// slot); see lb_id_slot in include/lb.h. Writing an array slot costs the
// kernel a third of inserting into, or deleting from, a hash map. The
// reconciler's ID allocator never gives two live IDs one slot; a reader
// holding a released ID whose slot went to a newer one finds another ID
// there and treats its own as gone.
//
// slotted keeps the Map[uint32, V] of a hash keyed by ID over such an
// array: Update writes the value with its ID into its slot, Delete clears
// the slot (writes zeros) if it still holds that ID, Lookup checks the
// stored ID, and Iterate yields the non-empty slots by their IDs. Writing
// an ID whose slot holds another ID is an error, never an overwrite: it
// means a bug in the allocator or a foreign writer.
type slotted[V any, P slotValue[V]] struct {
	arr Map[uint32, V] // by slot
	n   uint32         // max_entries

	mu sync.Mutex
	// owner is the ID in each slot, as this process wrote or read it; nil
	// until the first write reads it from the array, and again after a
	// failed write, which may have written some slots.
	owner []uint32
	// slots and vals are the buffers of one batch.
	slots []uint32
	vals  []V
}

// slotValue is a pointer to the value of a dense ID map, which holds its
// ID.
type slotValue[V any] interface {
	*V
	slotID() uint32
	setSlotID(uint32)
}

func newSlotted[V any, P slotValue[V]](arr Map[uint32, V], maxEntries uint32) *slotted[V, P] {
	return &slotted[V, P]{arr: arr, n: max(maxEntries, 1)}
}

func (m *slotted[V, P]) Name() string { return m.arr.Name() }

func (m *slotted[V, P]) slot(id uint32) uint32 { return id % m.n }

func (m *slotted[V, P]) Lookup(id uint32) (V, bool, error) {
	var zero V
	if id == 0 {
		return zero, false, nil
	}
	v, ok, err := m.arr.Lookup(m.slot(id))
	if err != nil || !ok || P(&v).slotID() != id {
		return zero, false, err
	}
	return v, true, nil
}

func (m *slotted[V, P]) Update(id uint32, v V) error {
	return m.BatchUpdate([]uint32{id}, []V{v})
}

func (m *slotted[V, P]) Delete(id uint32) error {
	return m.BatchDelete([]uint32{id})
}

func (m *slotted[V, P]) BatchUpdate(ids []uint32, vs []V) error {
	if len(ids) != len(vs) {
		return fmt.Errorf("%s: batch update: %d keys but %d values", m.Name(), len(ids), len(vs))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.loadOwners(); err != nil {
		return err
	}
	m.slots, m.vals = m.slots[:0], m.vals[:0]
	for i, id := range ids {
		v := vs[i]
		s := m.slot(id)
		switch got := P(&v).slotID(); {
		case id == 0:
			return fmt.Errorf("%s: update: ID 0 marks an empty slot", m.Name())
		case got != 0 && got != id:
			return fmt.Errorf("%s: update %d: the value names ID %d", m.Name(), id, got)
		case m.owner[s] != 0 && m.owner[s] != id:
			err := fmt.Errorf("%s: update %d: slot %d holds ID %d", m.Name(), id, s, m.owner[s])
			m.owner = nil // it took the slots of the IDs before it
			return err
		}
		P(&v).setSlotID(id)
		m.owner[s] = id
		m.slots, m.vals = append(m.slots, s), append(m.vals, v)
	}
	return m.write()
}

// BatchDelete clears the slots that hold the IDs; a slot that holds
// another ID, or none, is left alone (the ID is gone already).
func (m *slotted[V, P]) BatchDelete(ids []uint32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.loadOwners(); err != nil {
		return err
	}
	m.slots, m.vals = m.slots[:0], m.vals[:0]
	var zero V
	for _, id := range ids {
		if s := m.slot(id); id != 0 && m.owner[s] == id {
			m.owner[s] = 0
			m.slots, m.vals = append(m.slots, s), append(m.vals, zero)
		}
	}
	return m.write()
}

// write writes the batch in slots and vals, the owners already set.
func (m *slotted[V, P]) write() error {
	if len(m.slots) == 0 {
		return nil
	}
	if err := m.arr.BatchUpdate(m.slots, m.vals); err != nil {
		m.owner = nil
		return err
	}
	return nil
}

// ebpfMap returns the kernel array behind the map, nil for an in-memory
// one.
func (m *slotted[V, P]) ebpfMap() *ebpf.Map {
	if k, ok := m.arr.(interface{ ebpfMap() *ebpf.Map }); ok {
		return k.ebpfMap()
	}
	return nil
}

// loadOwners reads which ID each slot holds, if it is not known.
func (m *slotted[V, P]) loadOwners() error {
	if m.owner != nil {
		return nil
	}
	owner := make([]uint32, m.n)
	err := m.arr.Iterate(func(s uint32, v V) bool {
		if s < m.n {
			owner[s] = P(&v).slotID()
		}
		return true
	})
	if err != nil {
		return err
	}
	m.owner = owner
	return nil
}

// Iterate yields the IDs of the non-empty slots with their values.
func (m *slotted[V, P]) Iterate(fn func(uint32, V) bool) error {
	return m.arr.Iterate(func(_ uint32, v V) bool {
		if id := P(&v).slotID(); id != 0 {
			return fn(id, v)
		}
		return true
	})
}
