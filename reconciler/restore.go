package reconciler

// Restart and pruning: what the pinned maps held at start is read back
// (restore), so that live flows keep their IDs, and what nobody claims is
// deleted once every source has synced (Prune).

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// Prune deletes what the maps hold that no frontend claims: restored
// frontends and backends nobody took back, and any entry with an unknown
// key. statedb's reconciler calls it only once the tables are initialized,
// that is, once every source has declared what it has.
func (o *ops) Prune(ctx context.Context, txn statedb.ReadTxn, objs iter.Seq2[*lb.Frontend, statedb.Revision]) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.initialized = true
	leftovers, err := o.prune(objs)
	switch {
	case err == nil && leftovers:
		err = o.room.recountBut(roomServices, roomMaglev)
	case err == nil:
		// The prune deleted entries no state counted.
		err = o.room.recount()
	default:
		o.room.stale = true
	}
	o.offerRoom()
	switch {
	case err == nil:
		o.pruneBackoff = 0
	case o.requestPrune != nil:
		// statedb's next prune is the periodic one; do not wait that long.
		o.pruneBackoff = min(max(2*o.pruneBackoff, pruneRetryMin), pruneRetryMax)
		time.AfterFunc(o.pruneBackoff, o.requestPrune)
	}
	return err
}

// prune reports whether it pruned restore's leftovers (leftovers.go),
// counting what it deleted from lb_services and lb_maglev.
func (o *ops) prune(objs iter.Seq2[*lb.Frontend, statedb.Revision]) (leftovers bool, err error) {
	desired := map[addrKey]struct{}{}
	for fe := range objs {
		desired[keyOf(fe.Address)] = struct{}{}
	}
	var (
		errs []error
		gone []task
	)
	defer func() {
		if err != nil {
			leftovers = false
		}
	}()
	for k := range o.frontends.all() {
		if _, ok := desired[k]; !ok {
			gone = append(gone, task{fe: &lb.Frontend{FrontendParams: lb.FrontendParams{Address: k.l3n4()}}})
		}
	}
	// Restored frontends nobody claimed yet: a desired one is adopted
	// (its update is on the way), with the backends its slots name; the
	// others are removed.
	for k := range o.restoredFrontends.all() {
		if _, ok := desired[k]; !ok {
			gone = append(gone, task{fe: &lb.Frontend{FrontendParams: lb.FrontendParams{Address: k.l3n4()}}})
		} else if _, err := o.claimFrontend(k.l3n4()); err != nil {
			errs = append(errs, err)
		}
	}
	o.remove(gone, true)
	for _, t := range gone {
		if t.err != nil {
			errs = append(errs, t.err)
		}
	}
	// Backends go last, once nothing the prune leaves names them.
	lo := o.leftovers
	o.leftovers = nil // a retry reads the maps again
	if lo != nil {
		if err := o.pruneLeftovers(lo); err != nil {
			return false, errors.Join(append(errs, err)...)
		}
	} else if err := o.pruneUnknown(); err != nil {
		return false, errors.Join(append(errs, err)...)
	}
	for k, i := range o.restoredBackends.all() {
		be := o.beStates.at(i)
		if err := o.maps.Backends.Delete(be.id); err != nil {
			errs = append(errs, err)
			continue
		}
		o.setMay(roomBackends, &be.inMap, false)
		o.restoredBackends.del(k)
		o.releaseBackend(i, be)
	}
	if lo != nil {
		if err := o.pruneLeftoverBackends(lo); err != nil {
			return false, errors.Join(append(errs, err)...)
		}
	} else if err := o.pruneUnknownBackends(); err != nil {
		return false, errors.Join(append(errs, err)...)
	}
	// What the orphan IDs named is gone now, and what the rev-NAT
	// entries nobody claimed named.
	for k, is := range o.restoredRevNat {
		for _, i := range is {
			o.orphanFrontendIDs = append(o.orphanFrontendIDs, o.feStates.at(i).id)
			o.feStates.release(i)
		}
		delete(o.restoredRevNat, k)
	}
	for _, id := range o.orphanFrontendIDs {
		if !o.frontendIDInUse(id) {
			o.feIDs.free(id)
			o.room.freed = true // an ID's slot, for a frontend waiting for one
		}
	}
	for _, id := range o.orphanBackendIDs {
		if !o.backendIDInUse(id) {
			o.beIDs.free(id)
		}
	}
	o.orphanFrontendIDs, o.orphanBackendIDs = nil, nil
	return lo != nil, errors.Join(errs...)
}

func (o *ops) frontendIDInUse(id uint32) bool {
	for _, i := range o.frontends.all() {
		if o.feStates.at(i).id == id {
			return true
		}
	}
	return false
}

func (o *ops) backendIDInUse(id uint32) bool {
	for _, i := range o.backends.all() {
		if o.beStates.at(i).id == id {
			return true
		}
	}
	for _, i := range o.restoredBackends.all() {
		if o.beStates.at(i).id == id {
			return true
		}
	}
	return false
}

// pruneUnknown deletes entries that no state accounts for (left behind by
// a crash between a write and its bookkeeping, or written by someone
// else), but lb_backends' (pruneUnknownBackends): the entries it deletes
// may name backends.
func (o *ops) pruneUnknown() error {
	byID := o.frontendsByID()

	if err := o.pruneServices(); err != nil {
		return err
	}
	if err := pruneMap(o.maps.RevNat, func(id uint32, _ bpf.RevNatValue) bool { return byID[id] != nil }); err != nil {
		return err
	}
	if err := pruneMap(o.maps.SourceRanges, func(k bpf.SourceRangeKey, _ uint8) bool {
		st := byID[k.RevNatID]
		if st == nil {
			return false
		}
		k.RevNatID = 0
		return st.hasRange(k)
	}); err != nil {
		return err
	}
	if err := o.pruneAffinity(byID); err != nil {
		return err
	}
	var staleTables []uint32
	if err := o.maps.Maglev.Iterate(func(id uint32, _ []uint32) bool {
		if st := byID[id]; st == nil || !st.maglev {
			staleTables = append(staleTables, id)
		}
		return true
	}); err != nil {
		return err
	}
	for _, id := range staleTables {
		if err := o.maps.Maglev.Delete(id); err != nil {
			return err
		}
	}
	return nil
}

// frontendsByID returns the states of the frontends by ID.
func (o *ops) frontendsByID() map[uint32]*frontendState {
	byID := make(map[uint32]*frontendState, o.frontends.len())
	for _, i := range o.frontends.all() {
		st := o.feStates.at(i)
		byID[st.id] = st
	}
	return byID
}

// pruneAffinity deletes the lb_affinity entries of unknown frontends and
// backends. The set of backend IDs is made only if there are entries.
func (o *ops) pruneAffinity(byID map[uint32]*frontendState) error {
	var backendIDs map[uint32]bool
	return pruneMap(o.maps.Affinity, func(k bpf.AffinityKey, v bpf.AffinityValue) bool {
		if backendIDs == nil {
			backendIDs = o.backendIDs()
		}
		return byID[k.RevNatID] != nil && backendIDs[v.BackendID]
	})
}

// pruneUnknownBackends deletes the lb_backends entries of backends that
// no state accounts for.
func (o *ops) pruneUnknownBackends() error {
	backendIDs := o.backendIDs()
	return pruneMap(o.maps.Backends, func(id uint32, _ bpf.Backend) bool { return backendIDs[id] })
}

// backendIDs returns the IDs of the backends in use.
func (o *ops) backendIDs() map[uint32]bool {
	ids := make(map[uint32]bool, o.backends.len())
	for _, i := range o.backends.all() {
		ids[o.beStates.at(i).id] = true
	}
	return ids
}

// pruneServices deletes the lb_services entries of unknown frontends and
// the slots past a frontend's count.
func (o *ops) pruneServices() error {
	var stale []bpf.ServiceKey
	err := o.maps.Services.Iterate(func(k bpf.ServiceKey, v bpf.ServiceValue) bool {
		st := o.frontend(keyOf(k.L3n4Addr()))
		if st == nil || k.Slot > st.slots {
			stale = append(stale, k)
		}
		return true
	})
	if err != nil {
		return err
	}
	// Masters first, so that no master outlives its slots.
	sortServiceKeys(stale)
	return o.maps.Services.BatchDelete(stale)
}

func sortServiceKeys(ks []bpf.ServiceKey) {
	slices.SortFunc(ks, func(a, b bpf.ServiceKey) int { return int(a.Slot) - int(b.Slot) })
}

// pruneMap deletes the entries of m for which keep returns false.
func pruneMap[K comparable, V any](m bpf.Map[K, V], keep func(K, V) bool) error {
	var stale []K
	if err := m.Iterate(func(k K, v V) bool {
		if !keep(k, v) {
			stale = append(stale, k)
		}
		return true
	}); err != nil {
		return err
	}
	return m.BatchDelete(stale)
}

// restore reads the pinned maps, so that frontends and backends get back
// the IDs that live flows carry. What nobody claims is pruned later.
func (o *ops) restore() error {
	start := time.Now()
	o.leftovers = &leftovers{}
	if err := o.readPinnedMaps(); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	// What restore read is the count: the maps are not read again.
	o.room.set(o.leftovers.counted, start)
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
	slotBackends, err := o.restoreFrontends()
	if err != nil {
		return err
	}
	byID := o.restoredByID(slotBackends)
	o.restoreWritten(slotBackends)
	if err := o.restoreRevNat(byID); err != nil {
		return err
	}
	if err := o.restoreFrontendExtras(byID); err != nil {
		return err
	}
	backendAddrs, err := o.restoreBackends(slotBackends)
	if err != nil {
		return err
	}
	o.restoreReferences(slotBackends, backendAddrs)
	return o.reserveOrphanIDs(byID, backendAddrs)
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
func (o *ops) restoreFrontends() (map[*frontendState][]restoredSlot, error) {
	slotBackends := map[*frontendState][]restoredSlot{}
	l := o.leftovers
	err := o.maps.Services.Iterate(func(k bpf.ServiceKey, v bpf.ServiceValue) bool {
		l.counted[roomServices]++
		addr := keyOf(k.L3n4Addr())
		if !l.scanServices && bpf.NewServiceKey(addr.l3n4(), k.Slot) != k {
			l.scanServices = true
		}
		var st *frontendState
		if i, ok := o.restoredFrontends.get(addr); ok {
			st = o.feStates.at(i)
		} else {
			i, st = o.newFrontendState(0)
			o.restoredFrontends.set(addr, i)
		}
		if k.Slot == 0 {
			st.id = v.RevNatID
			st.affinity = v.AffinityTimeout > 0
			st.hasMaster = true
			// Known as writeMasters writes it, so that the same master
			// is not written again.
			st.master, st.masterWritten = v.ServiceMaster, v.BackendID == 0
		} else {
			slotBackends[st] = append(slotBackends[st], restoredSlot{
				backendID: v.BackendID, revNatID: v.RevNatID, slot: k.Slot, plain: v.ServiceMaster == bpf.ServiceMaster{},
			})
		}
		st.slots = max(st.slots, k.Slot)
		return true
	})
	return slotBackends, err
}

// restoredByID drops the restored frontends that have slots but no
// master (nothing to adopt), reserves the IDs of the others, and returns
// them by ID.
func (o *ops) restoredByID(slotBackends map[*frontendState][]restoredSlot) map[uint32]*frontendState {
	byID := map[uint32]*frontendState{}
	for k, i := range o.restoredFrontends.all() {
		st := o.feStates.at(i)
		if st.id == 0 || !o.feIDs.slotFree(st.id) {
			o.leftovers.servicesOf(k, st, slotBackends[st])
		}
		if st.id == 0 {
			// Its slots are forgotten with it: the state's place in the
			// arena goes to the next restored frontend.
			delete(slotBackends, st)
			o.restoredFrontends.del(k)
			o.feStates.release(i)
			continue
		}
		if !o.feIDs.slotFree(st.id) {
			// Another restored frontend's ID holds its lb_rev_nat slot
			// (lb_rev_nat was recreated with another max_entries): it
			// takes a new ID, and this one waits for the prune.
			delete(slotBackends, st)
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
func (o *ops) restoreWritten(slotBackends map[*frontendState][]restoredSlot) {
	for st, slots := range slotBackends {
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

// restoreBackends reads lb_backends into restoredBackends, reserving
// their IDs, and returns their addresses by ID.
//
// An address may have two IDs there (a backend whose delete failed, and
// that a frontend took back under a new ID, before a restart): the one
// that restored slots name stays, so that their flows keep their backend
// ID; the other's entry is left to the prune (an unknown ID), its ID
// kept out of new hands until then. Slots naming the other still count
// a reference on the address (backendAddrs), as their update rewrites
// them.
func (o *ops) restoreBackends(slotBackends map[*frontendState][]restoredSlot) (map[uint32]addrKey, error) {
	named := map[uint32]bool{}
	for _, slots := range slotBackends {
		for _, s := range slots {
			named[s.backendID] = true
		}
	}
	backendAddrs := map[uint32]addrKey{}
	l := o.leftovers
	err := o.maps.Backends.Iterate(func(id uint32, v bpf.Backend) bool {
		l.counted[roomBackends]++
		k := keyOf(v.L3n4Addr())
		o.beIDs.reserve(id)
		backendAddrs[id] = k
		if j, dup := o.restoredBackends.get(k); dup {
			other := o.beStates.at(j)
			if named[other.id] || !named[id] {
				o.orphanBackendIDs = append(o.orphanBackendIDs, id)
				l.backends = append(l.backends, leftoverBackend{id, k})
				return true
			}
			o.orphanBackendIDs = append(o.orphanBackendIDs, other.id)
			l.backends = append(l.backends, leftoverBackend{other.id, k})
			o.beStates.release(j)
		}
		i, be := o.beStates.alloc()
		*be = backendState{key: k, id: id, value: valueOf(v), written: true, inMap: true}
		o.restoredBackends.set(k, i)
		return true
	})
	return backendAddrs, err
}

// restoreReferences makes each restored frontend hold references on the
// backends its slots name, so that no other frontend's update can delete
// them from under it.
func (o *ops) restoreReferences(slotBackends map[*frontendState][]restoredSlot, backendAddrs map[uint32]addrKey) {
	for st, slots := range slotBackends {
		if st.id == 0 {
			continue
		}
		for _, s := range slots {
			k, ok := backendAddrs[s.backendID]
			if !ok {
				continue
			}
			if i, be := o.adoptBackend(k); st.addBackend(i) {
				be.refs++
			}
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
func (o *ops) reserveOrphanIDs(byID map[uint32]*frontendState, backendAddrs map[uint32]addrKey) error {
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
		if _, ok := backendAddrs[v.BackendID]; !ok && !o.beIDs.inUse(v.BackendID) {
			o.beIDs.reserve(v.BackendID)
			o.orphanBackendIDs = append(o.orphanBackendIDs, v.BackendID)
		}
		return true
	})
}
