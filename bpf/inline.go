package bpf

import "github.com/lbstate/lbstate/lb"

// A master entry holds the backend IDs of its frontend's first slots
// (lb.h, "Inline slots"): most frontends are then one lb_services entry,
// which halves the entries a one-backend frontend costs and cuts a
// ten-backend one from eleven to one, and a reader sees the count and
// those slots in one value. These are the rules every writer and reader
// of the layout shares.

// InlineSlots (LB_INLINE_SLOTS) is how many slots a master entry holds
// itself: slots 1..InlineSlots live in its Backends, and only slots after
// them have entries of their own, so that a frontend with at most that
// many slots is one hash entry.
const InlineSlots = 16

// HasEntry reports whether slot (1..) of a frontend has an lb_services
// entry of its own, rather than living in its master entry.
func HasEntry(slot int) bool { return slot > InlineSlots }

// SlotEntries returns how many lb_services entries n slots of a frontend
// take beside its master entry.
func SlotEntries(n int) int { return max(0, n-InlineSlots) }

// Slots returns the frontend's slots in all: those taking new flows, the
// standby ones and the fallback ones.
func (m ServiceMaster) Slots() int { return int(m.Count) + int(m.Standby) + int(m.Fallback) }

// SetInline sets the master value's inline slots from ids, the backend
// IDs of slots 1..len(ids) (those past InlineSlots are not its own).
func (v *ServiceValue) SetInline(ids []uint32) {
	n := copy(v.Backends[:], ids)
	clear(v.Backends[n:])
}

// Inline returns the backend IDs of the master value's inline slots,
// 1..min(slots, InlineSlots), where slots is its Slots().
func (v *ServiceValue) Inline() []uint32 {
	return v.Backends[:min(v.Slots(), InlineSlots)]
}

// SlotBackend returns the backend ID of slot (1..) of the frontend fe
// whose master value is master: from master for an inline slot, else
// from the slot's entry in m (ok false if it has none).
func SlotBackend(m Map[ServiceKey, ServiceValue], fe lb.L3n4Addr, master ServiceValue, slot int) (id uint32, ok bool, err error) {
	if slot < 1 {
		return 0, false, nil
	}
	if !HasEntry(slot) {
		return master.Backends[slot-1], slot >= 1 && slot <= master.Slots(), nil
	}
	v, ok, err := m.Lookup(NewServiceKey(fe, uint16(slot)))
	return v.BackendID, ok, err
}

// WriteService writes the lb_services entries of frontend fe, whose
// master value is master and whose slots 1..len(ids) hold the backends
// ids, in the datapath's write order: the slots with entries of their
// own first, then the master that names them and holds the others. For
// tests, tools and loaders; the reconciler batches the same order over
// many frontends.
func WriteService(m Map[ServiceKey, ServiceValue], fe lb.L3n4Addr, master ServiceValue, ids []uint32) error {
	for i := InlineSlots; i < len(ids); i++ {
		if err := m.Update(NewServiceKey(fe, uint16(i+1)), ServiceValue{BackendID: ids[i], RevNatID: master.RevNatID}); err != nil {
			return err
		}
	}
	master.SetInline(ids)
	return m.Update(NewServiceKey(fe, 0), master)
}
