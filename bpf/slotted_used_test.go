package bpf

import (
	"errors"
	"slices"
	"testing"
)

// failingArray is a recordedArray whose next BatchUpdate fails after
// writing its first slot, as a kernel batch may.
type failingArray struct {
	*recordedArray
	failNext bool
}

func (a *failingArray) BatchUpdate(ss []uint32, vs []Backend) error {
	if a.failNext {
		a.failNext = false
		a.recordedArray.BatchUpdate(ss[:1], vs[:1])
		return errors.New("injected")
	}
	return a.recordedArray.BatchUpdate(ss, vs)
}

// A slot that never held an ID or fields is filled in one write, fields
// and ID together; every slot that held one takes a new ID in two (fields,
// then ID): after a delete, given back to its own ID or to the ID one
// table size up (a wrap of the slots), when an earlier agent left an ID
// or a deleted ID's fields in it, when restore found its ID in another
// map (MarkSlotsUsed), and after a write that failed. recordedArray
// checks each write; this counts them. Both ways a process starts are
// run: writing first, and reading the array whole first (restore).
func TestDenseIDMapFillsOnlyNeverUsedSlotsInOneWrite(t *testing.T) {
	be := func(a byte) Backend { return Backend{Addr: [16]byte{15: a}, ClusterID: uint32(a)} }
	for _, readFirst := range []bool{false, true} {
		t.Run(map[bool]string{false: "written first", true: "read first"}[readFirst], func(t *testing.T) {
			left := be(4) // an earlier agent's deleted ID 4: its fields
			live := be(5)
			live.ID = 5
			arr := &failingArray{recordedArray: newRecordedArray(t, map[uint32]Backend{4: left, 5: live, 6: {}})}
			m := &slotted[Backend]{arr: arr, n: 16,
				idOf: func(b Backend) uint32 { return b.ID }, withID: func(b Backend, id uint32) Backend { b.ID = id; return b }, fillInOneWrite: true}
			if readFirst {
				if err := m.Iterate(func(uint32, Backend) bool { return true }); err != nil {
					t.Fatal(err)
				}
			}
			writes := func(s uint32) int { return arr.writes[s] }
			step := func(what string, err error) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
			}
			step("fill 1, 2, 3, 6", m.BatchUpdate([]uint32{1, 2, 3, 6}, []Backend{be(1), be(2), be(3), be(6)}))
			for _, s := range []uint32{1, 2, 3, 6} {
				if writes(s) != 1 {
					t.Errorf("never-used slot %d: %d writes, want 1", s, writes(s))
				}
			}
			step("mark 7", m.MarkSlotsUsed(slices.Values([]uint32{7 + 16})))
			step("delete 1, 2", m.BatchDelete([]uint32{1, 2}))
			before := map[uint32]int{1: writes(1), 2: writes(2), 4: writes(4), 5: writes(5), 7: writes(7)}
			// 1 given back, 2's slot to 18, 4 over an earlier agent's
			// fields, 5 updated in place, 7 restored from another map.
			moved := be(5)
			moved.ClusterID = 55
			step("refill", m.BatchUpdate([]uint32{1, 18, 4, 5, 7}, []Backend{be(11), be(18), be(14), moved, be(17)}))
			for s, want := range map[uint32]int{1: 2, 2: 2, 4: 2, 5: 1, 7: 2} {
				if got := writes(s) - before[s]; got != want {
					t.Errorf("slot %d: %d writes, want %d", s, got, want)
				}
			}
			// A write that failed may have reached its slot: it counts
			// as used.
			arr.failNext = true
			if err := m.Update(9, be(9)); err == nil {
				t.Fatal("the injected failure was not returned")
			}
			step("delete 9", m.Delete(9))
			n := writes(9)
			step("retry 9", m.Update(9, be(9)))
			if got := writes(9) - n; got != 2 {
				t.Errorf("slot 9 after a failed write: %d writes, want 2", got)
			}
			for id, want := range map[uint32]Backend{1: be(11), 18: be(18), 4: be(14), 5: moved, 7: be(17), 9: be(9)} {
				want.ID = id
				if got, ok, _ := m.Lookup(id); !ok || got != want {
					t.Errorf("Lookup(%d) = %+v %v, want %+v", id, got, ok, want)
				}
			}
		})
	}
}

// lb_rev_nat fills no slot in one write: a frontend's master entry names
// its rev-NAT ID before the entry is written, so a reply may be reading
// a slot that never held an ID while it is filled.
func TestRevNatMapFillsEvenANeverUsedSlotInTwoWrites(t *testing.T) {
	arr := newRecordedArray(t, map[uint32]Backend{})
	arr.strict = true
	m := &slotted[Backend]{arr: arr, n: 16,
		idOf: func(b Backend) uint32 { return b.ID }, withID: func(b Backend, id uint32) Backend { b.ID = id; return b }}
	if err := m.BatchUpdate([]uint32{1, 2}, []Backend{{ClusterID: 1}, {ClusterID: 2}}); err != nil {
		t.Fatal(err)
	}
	if arr.writes[1] != 2 || arr.writes[2] != 2 {
		t.Errorf("never-used slots 1 and 2: %d and %d writes, want 2 each", arr.writes[1], arr.writes[2])
	}
	maps, err := NewMemoryMaps(DefaultConfig, nil)
	if err != nil {
		t.Fatal(err)
	}
	if maps.RevNat.(*slotted[RevNatValue]).fillInOneWrite || !maps.Backends.(*slotted[Backend]).fillInOneWrite {
		t.Error("lb_rev_nat fills never-used slots in one write, or lb_backends does not")
	}
}
