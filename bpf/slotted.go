package bpf

import (
	"fmt"
	"iter"
	"sync"

	"github.com/cilium/ebpf"

	"github.com/lbstate/lbstate/internal/sparse"
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
// the slot's ID (keeping its fields) if it still holds that ID, Lookup
// checks the stored ID, and Iterate yields the non-empty slots by their
// IDs. Writing an ID whose slot holds another ID is an error, never an
// overwrite: it means a bug in the allocator or a foreign writer.
//
// A delete writes the slot's fields back with ID 0, so it needs them:
// BatchDeleteHolding takes them from the caller (the reconciler knows
// what it wrote), Delete and BatchDelete read them from the array, a
// lookup per ID. The Go side keeps only each slot's ID: at 100,000
// services x 10 backends whole values cost 36 MB more.
//
// A slot taking a new ID gets its fields (with ID 0) and then its ID, two
// writes, so that a reader holding a reference to a slot never copies a
// new ID with old fields or the reverse (c/select.h). In lb_backends, a
// slot that never held an ID has no such reader: a backend ID is named
// (lb_services slots, Maglev tables, then conntrack and affinity) only
// after its entry is written, and IDs are handed out once each until the
// ID space wraps. With fillInOneWrite, such a slot is filled in one
// write, fields and ID together. Not in lb_rev_nat: a frontend's master
// entry names its rev-NAT ID before its lb_rev_nat entry is written, so
// a reply may look the ID up while its slot is filled.
//
// used records the slots that ever held an ID or fields, precisely:
// every slot this process wrote, every slot read from the array that is
// not all zero, and the slots of IDs that restore found in other maps
// (MarkSlotsUsed). When unsure, a slot counts as used: two writes.
type slotted[V comparable] struct {
	arr Map[uint32, V] // by slot
	n   uint32         // max_entries
	// idOf and withID read and set a value's ID. (Plain functions of
	// values: a method through a type parameter's pointer would move
	// every value Iterate reads to the heap.)
	idOf   func(V) uint32
	withID func(V, uint32) V
	// fillInOneWrite: a never-used slot takes its first ID in one write
	// (see above; lb_backends only).
	fillInOneWrite bool

	mu sync.Mutex
	// owner is the ID each slot holds, as this process wrote or read it;
	// nil until the first write reads it from the array, and again after
	// a failed write, which may have written some slots. It is sparse: a
	// slot costs memory only while it holds an ID, and the defaults give
	// lb_backends a million slots.
	owner *sparse.Array[uint32]
	// used holds the slots that ever held an ID or fields (see above):
	// nil until the first read of the array; it only grows, and
	// outlives owner's resets. A bitmap in pages: 136 bytes per 1,024
	// slots once used.
	used *sparse.Array[struct{}]
	// gen counts the writes, so that an Iterate that read every slot
	// knows whether what it read still holds.
	gen uint64
	// slots and vals are the buffers of one batch.
	slots []uint32
	vals  []V
}

func (m *slotted[V]) Name() string { return m.arr.Name() }

func (m *slotted[V]) slot(id uint32) uint32 { return id % m.n }

func (m *slotted[V]) Lookup(id uint32) (V, bool, error) {
	var zero V
	if id == 0 {
		return zero, false, nil
	}
	v, ok, err := m.arr.Lookup(m.slot(id))
	if err != nil || !ok || m.idOf(v) != id {
		return zero, false, err
	}
	return v, true, nil
}

func (m *slotted[V]) Update(id uint32, v V) error {
	return m.BatchUpdate([]uint32{id}, []V{v})
}

func (m *slotted[V]) Delete(id uint32) error {
	return m.BatchDelete([]uint32{id})
}

func (m *slotted[V]) BatchUpdate(ids []uint32, vs []V) error {
	if len(ids) != len(vs) {
		return fmt.Errorf("%s: batch update: %d keys but %d values", m.Name(), len(ids), len(vs))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.loadOwners(); err != nil {
		return err
	}
	// Bad input is refused before the loop below takes any slot: a slot
	// taken for an ID and never written would get its fields and its ID
	// in one write next time.
	for i, id := range ids {
		switch got := m.idOf(vs[i]); {
		case id == 0:
			return fmt.Errorf("%s: update: ID 0 marks an empty slot", m.Name())
		case got != 0 && got != id:
			return fmt.Errorf("%s: update %d: the value names ID %d", m.Name(), id, got)
		}
	}
	m.slots, m.vals = m.slots[:0], m.vals[:0]
	// Slots taking a new ID that held one before get their fields first
	// (with ID 0), all in one batch, and then, with the slots an ID keeps
	// and those never used, their IDs.
	var fresh int
	for i, id := range ids {
		v := vs[i]
		s := m.slot(id)
		if o := m.ownerOf(s); o != 0 && o != id {
			m.owner = nil // it took the slots of the IDs before it
			return fmt.Errorf("%s: update %d: slot %d holds ID %d", m.Name(), id, s, o)
		}
		if m.ownerOf(s) == 0 {
			if m.used.IsSet(s) || !m.fillInOneWrite {
				m.slots, m.vals = append(m.slots, s), append(m.vals, m.withID(v, 0))
				fresh++
			}
			// Marked before the write: a write that fails may have
			// reached the slot.
			m.used.Set(s, struct{}{})
		}
		m.owner.Set(s, id)
	}
	for i, id := range ids {
		m.slots, m.vals = append(m.slots, m.slot(id)), append(m.vals, m.withID(vs[i], id))
	}
	if fresh > 0 {
		if err := m.writeBatch(m.slots[:fresh], m.vals[:fresh]); err != nil {
			return err
		}
	}
	return m.writeBatch(m.slots[fresh:], m.vals[fresh:])
}

// BatchDelete clears the IDs of the slots that hold them, keeping their
// fields, which it reads from the array (a lookup per ID); a slot that
// holds another ID, or none, is left alone (the ID is gone already).
func (m *slotted[V]) BatchDelete(ids []uint32) error {
	return m.batchDelete(ids, nil)
}

// BatchDeleteHolding is BatchDelete of IDs whose slots hold vals[i]'s
// fields, as the caller last wrote them (their IDs are ignored): it reads
// nothing. A delete writes the fields back with ID 0, so fields other
// than the slot's would change its ID and its fields in one write.
func (m *slotted[V]) BatchDeleteHolding(ids []uint32, vals []V) error {
	if len(ids) != len(vals) {
		return fmt.Errorf("%s: batch delete: %d keys but %d values", m.Name(), len(ids), len(vals))
	}
	return m.batchDelete(ids, vals)
}

func (m *slotted[V]) batchDelete(ids []uint32, holding []V) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.loadOwners(); err != nil {
		return err
	}
	m.slots, m.vals = m.slots[:0], m.vals[:0]
	for i, id := range ids {
		s := m.slot(id)
		if id == 0 || m.ownerOf(s) != id {
			continue
		}
		var v V
		if holding != nil {
			v = holding[i]
		} else {
			got, ok, err := m.arr.Lookup(s)
			if err != nil {
				m.owner = nil // the owners cleared before it are not written
				return err
			}
			if !ok || m.idOf(got) != id {
				m.owner = nil // someone else wrote it: read the slots again
				return fmt.Errorf("%s: delete %d: slot %d does not hold it", m.Name(), id, s)
			}
			v = got
		}
		m.owner.Clear(s)
		m.slots, m.vals = append(m.slots, s), append(m.vals, m.withID(v, 0))
	}
	return m.writeBatch(m.slots, m.vals)
}

// writeBatch writes values into slots, the owners already set.
func (m *slotted[V]) writeBatch(slots []uint32, vals []V) error {
	if len(slots) == 0 {
		return nil
	}
	m.gen++
	if err := m.arr.BatchUpdate(slots, vals); err != nil {
		m.owner = nil
		return err
	}
	return nil
}

// ebpfMap returns the kernel array behind the map, nil for an in-memory
// one.
func (m *slotted[V]) ebpfMap() *ebpf.Map {
	if k, ok := m.arr.(interface{ ebpfMap() *ebpf.Map }); ok {
		return k.ebpfMap()
	}
	return nil
}

// loadOwners reads which ID each slot holds, if it is not known, and
// adds the slots that are not all zero to used.
func (m *slotted[V]) loadOwners() error {
	if m.owner != nil {
		return nil
	}
	owner, used := sparse.New[uint32](m.n), m.used
	if used == nil {
		used = sparse.New[struct{}](m.n)
	}
	var zero V
	err := m.scan(func(s uint32, v V) bool {
		if s >= m.n {
			return true
		}
		if id := m.idOf(v); id != 0 {
			owner.Set(s, id)
		}
		if v != zero {
			used.Set(s, struct{}{})
		}
		return true
	})
	if err != nil {
		// A used set that exists keeps what the scan added; a new one
		// is dropped: used, once there, covers a whole read of the array.
		return err
	}
	m.owner, m.used = owner, used
	return nil
}

// MarkSlotsUsed records that readers may hold ids (restore found them in
// other maps): their slots, if empty, take an ID in two writes, never in
// one. It writes nothing.
func (m *slotted[V]) MarkSlotsUsed(ids iter.Seq[uint32]) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.loadOwners(); err != nil {
		return err
	}
	for id := range ids {
		if id != 0 {
			m.used.Set(m.slot(id), struct{}{})
		}
	}
	return nil
}

// ownerOf returns the ID slot s holds, 0 for none; owner must be known.
func (m *slotted[V]) ownerOf(s uint32) uint32 {
	return m.owner.Get(s)
}

// Count returns the number of non-empty slots: from what this process
// wrote once it knows the slots, else by reading them (which Iterate
// does too), so that the reconciler's recounts of a map of many slots
// cost nothing.
func (m *slotted[V]) Count() (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.loadOwners(); err != nil {
		return 0, err
	}
	return m.owner.Len(), nil
}

// Iterate yields the IDs of the non-empty slots with their values. Having
// read every slot with no write in between, it keeps what it read for
// the writes to come (restore reads the maps before the first write).
func (m *slotted[V]) Iterate(fn func(uint32, V) bool) error {
	m.mu.Lock()
	gen, known := m.gen, m.owner != nil
	m.mu.Unlock()
	var owner *sparse.Array[uint32]
	var used *sparse.Array[struct{}]
	var zero V
	if !known {
		owner, used = sparse.New[uint32](m.n), sparse.New[struct{}](m.n)
	}
	all := true
	err := m.scan(func(s uint32, v V) bool {
		if owner != nil && s < m.n && v != zero {
			used.Set(s, struct{}{})
		}
		id := m.idOf(v)
		if id == 0 {
			return true
		}
		if owner != nil && s < m.n {
			owner.Set(s, id)
		}
		all = fn(id, v)
		return all
	})
	if err == nil && all && owner != nil {
		m.mu.Lock()
		if m.owner == nil && m.gen == gen {
			m.owner = owner
			// A used set that exists covers a whole read of the array
			// already, and every write since (loadOwners).
			if m.used == nil {
				m.used = used
			}
		}
		m.mu.Unlock()
	}
	return err
}

// scan calls fn for the slots of the array, or for the in-memory array
// only for those ever written: the others are empty.
func (m *slotted[V]) scan(fn func(uint32, V) bool) error {
	if mem, ok := m.arr.(*memArray[V]); ok {
		return mem.memMap.Iterate(fn)
	}
	return m.arr.Iterate(fn)
}
