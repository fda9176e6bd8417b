package bpf

import (
	"fmt"
	"maps"
	"testing"
)

// recordedArray is an array of Backends that checks every write against
// the slot's value before it and the slot's past.
type recordedArray struct {
	errorf  func(format string, args ...any)
	slots   map[uint32]Backend
	lookups int
	// held marks the slots that ever held an ID or fields: those that
	// are not all zero at the start (what an earlier agent left), and
	// each slot written since. writes counts the writes of each slot.
	held   map[uint32]bool
	writes map[uint32]int
	// strict fails a never-used slot filled in one write too, as for
	// lb_rev_nat, whose IDs are named before their entries are written.
	strict bool
}

func newRecordedArray(t *testing.T, slots map[uint32]Backend) *recordedArray {
	a := &recordedArray{errorf: t.Errorf, slots: slots, held: map[uint32]bool{}, writes: map[uint32]int{}}
	for s, v := range slots {
		a.held[s] = v != Backend{}
	}
	return a
}

func (a *recordedArray) Name() string { return "lb_backends" }
func (a *recordedArray) Lookup(s uint32) (Backend, bool, error) {
	a.lookups++
	v, ok := a.slots[s]
	return v, ok, nil
}
func (a *recordedArray) Update(s uint32, v Backend) error {
	return a.BatchUpdate([]uint32{s}, []Backend{v})
}
func (a *recordedArray) Delete(s uint32) error { return a.Update(s, Backend{}) }
func (a *recordedArray) BatchDelete(ss []uint32) error {
	for _, s := range ss {
		a.Delete(s)
	}
	return nil
}
func (a *recordedArray) Iterate(fn func(uint32, Backend) bool) error {
	for s, v := range maps.All(a.slots) {
		if !fn(s, v) {
			break
		}
	}
	return nil
}

// BatchUpdate fails the test on a write that changes a slot's ID and
// anything else at once, unless the slot never held an ID or fields
// (no reader can hold a reference to it), or that changes the fields
// of a live ID's address.
func (a *recordedArray) BatchUpdate(ss []uint32, vs []Backend) error {
	for i, s := range ss {
		old, v := a.slots[s], vs[i]
		fields, oldFields := v, old
		fields.ID, oldFields.ID = 0, 0
		if old.ID != v.ID && fields != oldFields && (a.held[s] || a.strict) {
			a.errorf("slot %d: one write changed ID %d to %d and the fields %+v to %+v", s, old.ID, v.ID, oldFields, fields)
		}
		if old.ID != 0 && old.ID == v.ID && old.Addr != v.Addr {
			a.errorf("slot %d: ID %d's address changed in place", s, v.ID)
		}
		a.slots[s] = v
		a.held[s] = true
		a.writes[s]++
	}
	return nil
}

// The checker above is what keeps slotted honest: it must fail a slot
// given to another ID in one write, and an ID given back its slot in one
// write after a delete (the bugs two writes prevent), and let a slot
// that never held anything be filled in one.
func TestDenseIDMapCheckerFailsOneWriteToASlotThatHeldAnID(t *testing.T) {
	var failures []string
	arr := newRecordedArray(t, map[uint32]Backend{})
	arr.errorf = func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
	be := func(a byte, id uint32) Backend { return Backend{Addr: [16]byte{15: a}, ClusterID: uint32(a), ID: id} }
	arr.Update(1, be(1, 1)) // never used: fine
	if len(failures) != 0 {
		t.Fatalf("a never-used slot filled in one write was failed: %v", failures)
	}
	arr.Update(1, be(1, 0)) // deleted: its fields kept
	arr.Update(1, be(9, 1)) // its own ID back with other fields, in one write
	arr.Update(1, be(5, 5)) // another ID, in one write
	if len(failures) != 2 {
		t.Errorf("%d failures, want 2 (an ID given back, another ID, each in one write): %v", len(failures), failures)
	}
}

// A program copying a dense ID map's value while the agent writes its
// slot re-reads the ID after the copy (c/select.h): that finds every torn
// copy only if no write changes a slot's ID and its fields together. A
// slot reused by another ID, deleted, and given back to its own ID, one
// by one and in batches, is never written so.
func TestDenseIDMapNeverChangesIDAndFieldsInOneWrite(t *testing.T) {
	arr := newRecordedArray(t, map[uint32]Backend{})
	m := &slotted[Backend]{arr: arr, n: 4,
		idOf: func(b Backend) uint32 { return b.ID }, withID: func(b Backend, id uint32) Backend { b.ID = id; return b }, fillInOneWrite: true}
	be := func(a byte, state uint8) Backend {
		return Backend{Addr: [16]byte{15: a}, State: state, ClusterID: uint32(a)}
	}
	steps := []func() error{
		func() error { return m.BatchUpdate([]uint32{1, 2, 3}, []Backend{be(1, 0), be(2, 0), be(3, 0)}) },
		func() error { return m.Update(1, be(1, 2)) }, // a state change in place
		func() error { return m.Delete(1) },
		func() error { return m.Update(5, be(5, 0)) }, // slot 1, another ID
		func() error { return m.BatchDelete([]uint32{5, 2}) },
		func() error { return m.BatchUpdate([]uint32{1, 6, 3}, []Backend{be(1, 0), be(6, 1), be(3, 1)}) },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	for id, want := range map[uint32]Backend{1: be(1, 0), 6: be(6, 1), 3: be(3, 1)} {
		want.ID = id
		if got, ok, _ := m.Lookup(id); !ok || got != want {
			t.Errorf("Lookup(%d) = %+v %v, want %+v", id, got, ok, want)
		}
	}
	if got, ok, _ := m.Lookup(5); ok {
		t.Errorf("deleted ID 5 reads back as %+v", got)
	}
}

// A delete given what the slots hold (BatchDeleteHolding, as the
// reconciler deletes what it wrote) reads no slot, and still writes each
// slot's fields back with ID 0, never changing both at once; a slot that
// another ID holds is left alone. Plain deletes read the fields first.
func TestDenseIDMapDeleteHoldingReadsNoSlot(t *testing.T) {
	arr := newRecordedArray(t, map[uint32]Backend{})
	m := &slotted[Backend]{arr: arr, n: 4,
		idOf: func(b Backend) uint32 { return b.ID }, withID: func(b Backend, id uint32) Backend { b.ID = id; return b }, fillInOneWrite: true}
	be := func(a byte) Backend { return Backend{Addr: [16]byte{15: a}, ClusterID: uint32(a)} }
	if err := m.BatchUpdate([]uint32{1, 2, 3}, []Backend{be(1), be(2), be(3)}); err != nil {
		t.Fatal(err)
	}
	// ID 5 would be slot 1's, which ID 1 holds: nothing to delete.
	if err := m.BatchDeleteHolding([]uint32{1, 2, 5}, []Backend{be(1), be(2), be(5)}); err != nil {
		t.Fatal(err)
	}
	if arr.lookups != 0 {
		t.Errorf("BatchDeleteHolding looked up %d slots", arr.lookups)
	}
	for s, want := range map[uint32]Backend{1: be(1), 2: be(2)} {
		if got := arr.slots[s]; got != want {
			t.Errorf("slot %d after the delete: %+v, want its fields with ID 0 %+v", s, got, want)
		}
	}
	if err := m.BatchDelete([]uint32{3}); err != nil {
		t.Fatal(err)
	}
	if want := be(3); arr.slots[3] != want || arr.lookups != 1 {
		t.Errorf("slot 3 after a plain delete: %+v (%d lookups), want %+v after one lookup", arr.slots[3], arr.lookups, want)
	}
	if n, _ := m.Count(); n != 0 {
		t.Errorf("Count = %d after every ID was deleted", n)
	}
	if err := m.BatchDeleteHolding([]uint32{1}, nil); err == nil {
		t.Error("BatchDeleteHolding took 1 key with 0 values")
	}
}

// A batch update refused for a bad value writes nothing, and leaves the
// mirror of the slots as it was: an ID before the bad one is not taken
// for written, so that its next update still writes its fields before
// its ID, and Count does not count it.
func TestDenseIDMapRefusedBatchLeavesSlotsUnclaimed(t *testing.T) {
	arr := newRecordedArray(t, map[uint32]Backend{})
	m := &slotted[Backend]{arr: arr, n: 4,
		idOf: func(b Backend) uint32 { return b.ID }, withID: func(b Backend, id uint32) Backend { b.ID = id; return b }, fillInOneWrite: true}
	be := func(a byte) Backend { return Backend{Addr: [16]byte{15: a}, ClusterID: uint32(a)} }
	// Slot 1 holds the fields of a deleted ID.
	if err := m.Update(5, be(5)); err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(5); err != nil {
		t.Fatal(err)
	}
	named := be(2)
	named.ID = 7
	if err := m.BatchUpdate([]uint32{1, 2}, []Backend{be(1), named}); err == nil {
		t.Fatal("a value naming another ID was written")
	}
	if err := m.BatchUpdate([]uint32{1, 0}, []Backend{be(1), be(9)}); err == nil {
		t.Fatal("ID 0 was written")
	}
	if n, _ := m.Count(); n != 0 {
		t.Errorf("Count = %d after refused batches, want 0", n)
	}
	if err := m.Update(1, be(1)); err != nil { // recordedArray checks the writes
		t.Fatal(err)
	}
	if got, ok, _ := m.Lookup(1); !ok || got.ClusterID != 1 {
		t.Errorf("Lookup(1) = %+v %v after its update", got, ok)
	}
}
