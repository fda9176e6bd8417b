package reconciler

// Pruning: what the maps hold that no frontend claims is deleted once
// every source has synced.

import (
	"context"
	"errors"
	"iter"
	"maps"
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
	if err := o.lock(); err != nil {
		o.mu.Unlock()
		return err
	}
	defer o.mu.Unlock()
	o.initialized = true
	// After a restart whose restore found the maps to hold just what its
	// states account for, the first prune deletes through states only,
	// which count what they delete.
	exact := o.leftovers != nil && o.leftovers.exact
	err := o.prune(objs)
	if err == nil && !(exact && !o.room.stale) {
		// The prune deleted entries no state counted; and after a
		// restart, restore counted entries that states then wrote and
		// counted again, or that wait for a state that has not written
		// them yet: only a count says what the maps hold.
		err = o.room.recount()
	} else if err != nil {
		o.room.stale = true
	}
	o.offerRoom()
	o.retryPrune(err)
	return err
}

// retryPrune asks for another look, with backoff, after a failed prune,
// or one that left slots naming a backend ID restore dropped: statedb's
// next prune is the periodic one; do not wait that long. The latter
// needs no prune of every map, only a look at those IDs (checkDropped):
// at 100,000 services x 10 backends a full prune costs ~2 s of CPU, and
// a slot that waits for room may name such an ID for minutes.
func (o *ops) retryPrune(err error) {
	switch {
	case err == nil && len(o.droppedBackends) == 0:
		o.pruneBackoff = 0
		return
	case o.requestPrune == nil:
		return
	}
	o.pruneBackoff = min(max(2*o.pruneBackoff, pruneRetryMin), pruneRetryMax)
	switch {
	case err != nil:
		time.AfterFunc(o.pruneBackoff, o.requestPrune)
	case !o.droppedCheckDue:
		// One timer at a time: each prune would start another that asks
		// again, for as long as a slot names the ID.
		o.droppedCheckDue = true
		time.AfterFunc(o.pruneBackoff, o.checkDropped)
	}
}

// checkDropped deletes the entries of the backend IDs restore dropped
// that no slot names any more, and the affinity pins naming them, and
// frees the IDs (what a prune would do for them, and nothing else); it
// asks for a full prune if that fails.
// It runs on a timer, under the lock every entry point takes.
func (o *ops) checkDropped() {
	restoreErr := o.lock()
	defer o.mu.Unlock()
	o.droppedCheckDue = false
	if restoreErr != nil || o.stopped || len(o.droppedBackends) == 0 {
		return
	}
	dropped := maps.Clone(o.droppedBackends)
	named, err := o.droppedStillNamed()
	if err == nil {
		// Restore keeps a dropped ID out of new hands (an orphan): no
		// backend has it, and nothing but its own entry is left to go.
		var stale []uint32
		for id := range dropped {
			if !named[id] {
				stale = append(stale, id)
			}
		}
		n, _ := bpf.Count(o.maps.Backends)
		if err = o.clearPinsOf(stale); err == nil {
			err = o.maps.Backends.BatchDelete(stale)
		}
		if err == nil {
			after, _ := bpf.Count(o.maps.Backends)
			o.use(roomBackends, after-n)
			o.orphanBackendIDs = slices.DeleteFunc(o.orphanBackendIDs, func(id uint32) bool {
				if _, ok := dropped[id]; ok && !named[id] {
					o.beIDs.free(id)
					return true
				}
				return false
			})
			// The entries are room a frontend may be waiting for: no
			// round of statedb's need come to offer it.
			o.offerRoom()
		}
	}
	if err != nil {
		o.log.Warn("Deleting the backend IDs restore dropped failed; a prune retries", "error", err)
	}
	o.retryPrune(err)
	if droppedChecked != nil {
		droppedChecked()
	}
}

// clearPinsOf deletes the lb_affinity entries, of any frontend, that
// name one of ids, in one walk: the datapath may have pinned clients to a
// dropped ID while a slot named it (after the prune), and a pin to a
// freed ID would follow whichever backend of its frontend takes the ID
// next. Once no slot names an ID, the datapath pins no client to it.
func (o *ops) clearPinsOf(ids []uint32) error {
	if len(ids) == 0 {
		return nil
	}
	gone := make(map[uint32]bool, len(ids))
	for _, id := range ids {
		gone[id] = true
	}
	return o.deletePinsWhere(false, func(_ bpf.AffinityKey, v bpf.AffinityValue) bool { return gone[v.BackendID] })
}

// droppedChecked is called after each checkDropped, for tests.
var droppedChecked func()

// prune deletes what no frontend accounts for: after a restart, restore's
// leftovers (leftovers.go), else whatever a read of the maps finds.
func (o *ops) prune(objs iter.Seq2[*lb.Frontend, statedb.Revision]) error {
	desired := map[addrKey]struct{}{}
	for fe := range objs {
		desired[keyOf(fe.Address)] = struct{}{}
	}
	var (
		errs []error
		gone []task
	)
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
			return errors.Join(append(errs, err)...)
		}
	} else if err := o.pruneUnknown(); err != nil {
		return errors.Join(append(errs, err)...)
	}
	named, err := o.droppedStillNamed()
	if err != nil {
		return errors.Join(append(errs, err)...)
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
		if err := o.pruneLeftoverBackends(lo, named); err != nil {
			return errors.Join(append(errs, err)...)
		}
	} else if err := o.pruneUnknownBackends(named); err != nil {
		return errors.Join(append(errs, err)...)
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
	// The IDs in use are indexed once, not searched for each orphan: 5,000
	// orphans at 10,000 x 10 once took the prune 47 s.
	if len(o.orphanFrontendIDs) > 0 {
		inUse := idsInUse(o.feIDs.slots, func(i uint32) uint32 { return o.feStates.at(i).id }, o.frontends.all())
		for _, id := range o.orphanFrontendIDs {
			if !inUse.has(id) {
				o.feIDs.free(id)
				o.room.freed = true // an ID's slot, for a frontend waiting for one
			}
		}
	}
	var keep []uint32
	if len(o.orphanBackendIDs) > 0 {
		inUse := idsInUse(o.beIDs.slots, func(i uint32) uint32 { return o.beStates.at(i).id }, o.backends.all(), o.restoredBackends.all())
		for _, id := range o.orphanBackendIDs {
			switch {
			case named[id]:
				keep = append(keep, id) // until a prune finds no slot naming it
			case !inUse.has(id):
				o.beIDs.free(id)
			}
		}
	}
	o.orphanFrontendIDs, o.orphanBackendIDs = nil, keep
	return errors.Join(errs...)
}

// idsInUse indexes the IDs (idOf an arena index) of the states the
// maps hold, by slot of a dense ID map of slots.
func idsInUse(slots uint32, idOf func(uint32) uint32, maps ...iter.Seq2[addrKey, uint32]) *idIndex {
	ids := newIDIndex(slots)
	for _, m := range maps {
		for _, i := range m {
			ids.set(idOf(i), 0)
		}
	}
	return ids
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
// Those of IDs restore dropped that slots still name stay (named).
func (o *ops) pruneUnknownBackends(named map[uint32]bool) error {
	backendIDs := o.backendIDs()
	// The parked ones left are those whose delete just failed: their
	// states say their entries are there, and a frontend taking one
	// back does not write it again.
	for _, i := range o.restoredBackends.all() {
		backendIDs[o.beStates.at(i).id] = true
	}
	return pruneMap(o.maps.Backends, func(id uint32, _ bpf.Backend) bool { return backendIDs[id] || named[id] })
}

// droppedStillNamed returns the backend IDs that restore dropped for
// another ID of the same address (restoreBackends) and that a slot still
// names: a frontend whose update, which rewrites its slots to the ID
// kept, has yet to succeed. Their entries and IDs stay until a prune
// finds no slot naming them; the others are forgotten, their entries
// left to the prune. It reads lb_services only while there are such IDs.
func (o *ops) droppedStillNamed() (map[uint32]bool, error) {
	if len(o.droppedBackends) == 0 {
		return nil, nil
	}
	named, known := o.droppedNamedByStates()
	if known {
		o.forgetDroppedUnless(named)
		return named, nil
	}
	named = map[uint32]bool{}
	err := o.maps.Services.Iterate(func(k bpf.ServiceKey, v bpf.ServiceValue) bool {
		if _, ok := o.droppedBackends[v.BackendID]; ok && k.Slot > 0 {
			named[v.BackendID] = true
		}
		if k.Slot == 0 {
			for _, id := range v.Inline() {
				if _, ok := o.droppedBackends[id]; ok {
					named[id] = true
				}
			}
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	o.forgetDroppedUnless(named)
	return named, nil
}

func (o *ops) forgetDroppedUnless(named map[uint32]bool) {
	for id := range o.droppedBackends {
		if !named[id] {
			delete(o.droppedBackends, id)
		}
	}
}

// droppedNamedByStates returns the dropped backend IDs that frontends'
// slots name, from what their states know the slots hold, without
// reading lb_services (a million entries at 100,000 x 10). known is
// false if some state does not know what one of its slots holds (a
// failed write, a slot restore could not read as its own): only the map
// can say then.
func (o *ops) droppedNamedByStates() (named map[uint32]bool, known bool) {
	named = map[uint32]bool{}
	for _, m := range []*addrMap{&o.frontends, &o.restoredFrontends} {
		for _, i := range m.all() {
			st := o.feStates.at(i)
			written := st.written()
			if len(written) < int(st.slots) {
				return nil, false
			}
			for _, id := range written[:st.slots] {
				if id == 0 { // unknown (restoreWritten)
					return nil, false
				}
				if _, ok := o.droppedBackends[id]; ok {
					named[id] = true
				}
			}
		}
	}
	return named, true
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
		if st := o.frontend(keyOf(k.L3n4Addr())); !owns(st, k.Slot) {
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

// owns reports whether the lb_services entry of slot is one that the
// frontend whose state is st may have: its master, or a slot entry past
// the inline ones within its slots. An entry of an inline slot is a
// leftover of the layout before them (bpf.InlineSlots): the master holds
// that slot now.
func owns(st *frontendState, slot uint16) bool {
	return st != nil && (slot == 0 || bpf.HasEntry(int(slot)) && slot <= st.slots)
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
