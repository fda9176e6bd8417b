package reconciler

// Restart: what the pinned maps held at start is read back (restore), so
// that live flows keep their IDs; what nobody claims is deleted once
// every source has synced (prune.go).

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/lbstate/lbstate/bpf"
)

// restore reads the pinned maps, so that frontends and backends get back
// the IDs that live flows carry. What nobody claims is pruned later.
func (o *ops) restore() error {
	start := time.Now()
	o.room.absent = o.absentMay
	o.leftovers = &leftovers{}
	if err := o.readPinnedMaps(); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := o.markRestoredSlotsUsed(); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	// What restore read is the count: the maps are not read again.
	o.room.set(o.leftovers.counted, start)
	o.leftovers.exact = o.leftovers.none() && o.restoredMay() == o.leftovers.counted
	// The backends that restored frontends' slots name are taken over
	// already (restoreReferences); the others wait in restoredBackends.
	frontends, backends := o.restoredFrontends.len(), o.backends.len()+o.restoredBackends.len()
	if frontends+backends > 0 {
		o.log.Info("Restored IDs from pinned maps", "frontends", frontends, "backends", backends)
	}
	return nil
}

// readPinnedMaps takes the steps of restore, in order: each reads what
// the ones before it found.
func (o *ops) readPinnedMaps() error {
	if err := o.resumeIDAllocators(); err != nil {
		return err
	}
	// lb_backends is read beside the frontends' maps: the two share no
	// state until restoreReferences, and the reconciler waits for all of
	// restore before its first update (at 100,000 x 10, ~1 s of CPU each).
	var backends restoredBackendIDs
	backendsRead := make(chan error, 1)
	go func() {
		var err error
		backends, err = o.readBackends()
		backendsRead <- err
	}()
	slots, byID, err := o.restoreFrontendMaps()
	if err := errors.Join(err, <-backendsRead); err != nil {
		return err
	}
	o.keepNamedBackends(slots, &backends)
	o.restoreReferences(slots, backends)
	o.backends.compact() // if presized for far more than came
	if len(backends.dropped) > 0 {
		o.droppedBackends = backends.dropped
	}
	return o.reserveOrphanIDs(byID, backends)
}

// restoreFrontendMaps reads lb_services, lb_rev_nat, lb_maglev and
// lb_src_range into the restored frontends' states. It returns each
// frontend's slots, and the frontends by ID.
func (o *ops) restoreFrontendMaps() (*restoredSlots, map[uint32]*frontendState, error) {
	slots, err := o.restoreFrontends()
	if err != nil {
		return nil, nil, err
	}
	byID := o.restoredByID(slots)
	o.restoreWritten(slots)
	if err := o.restoreRevNat(byID); err != nil {
		return nil, nil, err
	}
	return slots, byID, o.restoreFrontendExtras(byID)
}

// resumeIDAllocators continues each ID allocator from the mark it
// recorded, and has it record its marks from now on.
func (o *ops) resumeIDAllocators() error {
	for key, a := range map[uint32]*idAllocator{bpf.IDMarkFrontend: o.feIDs, bpf.IDMarkBackend: o.beIDs} {
		mark, _, err := o.maps.IDMarks.Lookup(key)
		if err != nil {
			return err
		}
		a.resume(mark)
		a.persist = func(mark uint32) error { return o.maps.IDMarks.Update(key, mark) }
	}
	return nil
}

// restoredSlot is a backend slot read at restore.
type restoredSlot struct {
	backendID, revNatID uint32
	slot                uint16
	// plain: the value holds nothing but the two IDs, as writeSlots
	// writes it.
	plain bool
}

// restoreFrontends reads lb_services into restoredFrontends: each
// address's ID and affinity from its master entry, the master's value,
// and its slot count. It returns each frontend's slots.
func (o *ops) restoreFrontends() (*restoredSlots, error) {
	slots := &restoredSlots{}
	l := o.leftovers
	err := o.maps.Services.Iterate(func(k bpf.ServiceKey, v bpf.ServiceValue) bool {
		l.counted[roomServices]++
		addr, same := keyOfServiceKey(k)
		if !same {
			l.scanServices = true
		}
		i, ok := o.restoredFrontends.get(addr)
		var st *frontendState
		if ok {
			st = o.feStates.at(i)
		} else {
			i, st = o.newFrontendState(0)
			o.restoredFrontends.set(addr, i)
		}
		switch {
		case k.Slot == 0:
			st.id = v.RevNatID
			st.affinity = v.AffinityTimeout > 0
			st.hasMaster = true
			// Known as writeMasters writes it, so that the same master
			// is not written again.
			inline := v.Inline()
			st.master, st.masterWritten = v.ServiceMaster, v.BackendID == 0 && !slices.ContainsFunc(
				v.Backends[len(inline):], func(id uint32) bool { return id != 0 })
			for s, id := range inline {
				slots.add(i, restoredSlot{backendID: id, revNatID: v.RevNatID, slot: uint16(s + 1), plain: true})
			}
			st.slots = max(st.slots, uint16(len(inline)))
		case !bpf.HasEntry(int(k.Slot)):
			// An entry of the layout before inline slots: the master
			// holds that slot now, and the prune deletes it.
			l.services = append(l.services, k)
		default:
			slots.add(i, restoredSlot{
				backendID: v.BackendID, revNatID: v.RevNatID, slot: k.Slot,
				plain: v.ServiceMaster == bpf.ServiceMaster{} && v.Backends == [bpf.InlineSlots]uint32{},
			})
			st.slots = max(st.slots, k.Slot)
		}
		return true
	})
	slots.group(o.feStates.next)
	return slots, err
}

// restoredByID drops the restored frontends that have slots but no
// master (nothing to adopt), reserves the IDs of the others, and returns
// them by ID.
func (o *ops) restoredByID(slots *restoredSlots) map[uint32]*frontendState {
	byID := make(map[uint32]*frontendState, o.restoredFrontends.len())
	for k, i := range o.restoredFrontends.all() {
		st := o.feStates.at(i)
		if st.id == 0 || !o.feIDs.slotFree(st.id) {
			o.leftovers.servicesOf(k, st, slots.of(i))
		}
		if st.id == 0 {
			// Its slots are forgotten with it: the state's place in the
			// arena goes to the next restored frontend.
			slots.forget(i)
			o.restoredFrontends.del(k)
			o.feStates.release(i)
			continue
		}
		if !o.feIDs.slotFree(st.id) {
			// Another restored frontend's ID holds its lb_rev_nat slot
			// (lb_rev_nat was recreated with another max_entries): it
			// takes a new ID, and this one waits for the prune.
			slots.forget(i)
			o.restoredFrontends.del(k)
			o.feStates.release(i)
			o.feIDs.reserve(st.id)
			o.orphanFrontendIDs = append(o.orphanFrontendIDs, st.id)
			continue
		}
		o.feIDs.reserve(st.id)
		byID[st.id] = st
	}
	return byID
}

// restoreWritten records the backend IDs that the restored frontends'
// slots hold as known, so that the first update writes only the slots
// that differ. A slot that is missing, or holds another frontend's ID or
// more than a slot holds, is recorded as ID 0, which no backend has: it
// is written.
func (o *ops) restoreWritten(restored *restoredSlots) {
	for i, slots := range restored.all {
		st := o.feStates.at(i)
		ids := make([]uint32, st.slots)
		for _, s := range slots {
			if s.revNatID == st.id && s.plain {
				ids[s.slot-1] = s.backendID
			}
		}
		st.setWritten(ids)
	}
}

// restoreRevNat reads lb_rev_nat once. The entry of a frontend a master
// entry names marks it as written. The entries of IDs that no master entry
// names go into restoredRevNat, adding them to byID, so that frontends
// keep their IDs when lb_services was recreated (--lb-recreate-maps).
// An entry is matched by the whole frontend it names (address, port,
// protocol, scope), so that twins sharing an address and port (TCP and
// UDP, or the two scopes of a NodePort) do not swap IDs and with them
// their affinity entries. An ID whose slot a master's ID holds is kept
// out of new hands until the prune (orphanFrontendIDs).
func (o *ops) restoreRevNat(byID map[uint32]*frontendState) error {
	// The entry of each restored frontend, as writeMasters writes it.
	want := make(map[uint32]bpf.RevNatValue, o.restoredFrontends.len())
	for k, i := range o.restoredFrontends.all() {
		want[o.feStates.at(i).id] = bpf.NewRevNatValue(k.l3n4())
	}
	l := o.leftovers
	err := o.maps.RevNat.Iterate(func(id uint32, v bpf.RevNatValue) bool {
		l.counted[roomRevNat]++
		st := byID[id]
		if st == nil {
			l.revNat = append(l.revNat, id)
		}
		switch {
		case st != nil:
			st.hasRevNat = true
			// Known when it holds what would be written, so that it is
			// not written again.
			v.ID = 0
			st.revNatWritten = want[id] == v
		case o.feIDs.slotFree(id):
			i, st := o.newFrontendState(id)
			st.hasRevNat = true
			byID[id] = st
			o.feIDs.reserve(id)
			k := keyOf(v.L3n4Addr())
			o.restoredRevNat[k] = append(o.restoredRevNat[k], i)
		default:
			o.reserveOrphanFrontendID(byID, id)
		}
		return true
	})
	for _, is := range o.restoredRevNat {
		slices.SortFunc(is, func(a, b uint32) int { return cmp.Compare(o.feStates.at(a).id, o.feStates.at(b).id) })
	}
	return err
}

// restoreFrontendExtras records which restored frontends have a Maglev
// table and which source ranges, so that an update replaces them and a
// prune keeps them.
// Those of frontends restored from lb_rev_nat alone (no master entry)
// are leftovers, as are their rev-NAT entries: the first prune deletes
// those that no frontend claimed.
func (o *ops) restoreFrontendExtras(byID map[uint32]*frontendState) error {
	l := o.leftovers
	if err := o.maps.Maglev.Iterate(func(id uint32, _ []uint32) bool {
		l.counted[roomMaglev]++
		st := byID[id]
		if st != nil {
			st.maglev = true
		}
		if st == nil || !st.hasMaster {
			l.maglev = append(l.maglev, id)
		}
		return true
	}); err != nil {
		return err
	}
	return o.maps.SourceRanges.Iterate(func(k bpf.SourceRangeKey, _ uint8) bool {
		l.counted[roomSourceRanges]++
		st := byID[k.RevNatID]
		if st == nil || !st.hasMaster {
			l.sourceRanges = append(l.sourceRanges, k)
		}
		if st != nil {
			k.RevNatID = 0
			st.addRange(k)
		}
		return true
	})
}

// restoreReferences makes each restored frontend hold references on the
// backends its slots name, so that no other frontend's update can delete
// them from under it. The backends that no slot names leave o.backends
// for restoredBackends, where they wait for a frontend.
func (o *ops) restoreReferences(slots *restoredSlots, backends restoredBackendIDs) {
	held := 0 // backends with a reference
	for i, ss := range slots.all {
		st := o.feStates.at(i)
		if st.id == 0 {
			continue
		}
		if len(ss) > 1 {
			st.reserveBackends(len(ss))
		}
		for _, s := range ss {
			j, ok := backends.at(o, s.backendID)
			if !ok {
				continue
			}
			if st.addBackend(j) {
				be := o.beStates.at(j)
				if be.refs == 0 {
					held++
				}
				be.refs++
			}
		}
	}
	if held == o.backends.len() {
		return // none waits: no pass over them (a million at 100,000 x 10)
	}
	for k, j := range o.backends.all() {
		if o.beStates.at(j).refs == 0 {
			o.backends.del(k)
			o.restoredBackends.set(k, j)
		}
	}
}

// reserveOrphanFrontendID keeps a frontend ID that a map still holds,
// but that no restored frontend has, out of new hands until a prune has
// deleted what names it.
func (o *ops) reserveOrphanFrontendID(byID map[uint32]*frontendState, id uint32) {
	if _, ok := byID[id]; !ok && !o.feIDs.inUse(id) {
		o.feIDs.reserve(id)
		o.orphanFrontendIDs = append(o.orphanFrontendIDs, id)
	}
}

// reserveOrphanIDs keeps the IDs that other maps still use, but no
// master entry or backend accounts for, out of new hands until a prune
// has deleted what names them.
func (o *ops) reserveOrphanIDs(byID map[uint32]*frontendState, backends restoredBackendIDs) error {
	reserveOrphan := func(id uint32) { o.reserveOrphanFrontendID(byID, id) }
	if err := o.maps.Maglev.Iterate(func(id uint32, _ []uint32) bool { reserveOrphan(id); return true }); err != nil {
		return err
	}
	if err := o.maps.SourceRanges.Iterate(func(k bpf.SourceRangeKey, _ uint8) bool { reserveOrphan(k.RevNatID); return true }); err != nil {
		return err
	}
	return o.maps.Affinity.Iterate(func(k bpf.AffinityKey, v bpf.AffinityValue) bool {
		if st := byID[k.RevNatID]; st != nil {
			st.affinity = true // for a frontend known by its rev-NAT entry only
		}
		reserveOrphan(k.RevNatID)
		if !backends.has(v.BackendID) && !o.beIDs.inUse(v.BackendID) {
			o.beIDs.reserve(v.BackendID)
			o.orphanBackendIDs = append(o.orphanBackendIDs, v.BackendID)
		}
		return true
	})
}
