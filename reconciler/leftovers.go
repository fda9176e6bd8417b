package reconciler

// The first prune after a restart deletes from the entries restore read
// those that nobody accounts for, rather than reading every map again: at
// 100,000 services x 10 backends, the second reading of lb_services and
// lb_backends (and a million-entry set of backend IDs to check them
// against) cost 2 s of CPU before the restarted agent was pruned.
//
// The entries of a frontend restored from its master entry are accounted
// for by its state: it is claimed, or the prune removes it through that
// state. restore lists the others (leftovers), and the first prune
// deletes those that still belong to no frontend or backend, with the
// same tests as a full prune. Entries someone else writes between restore
// and the first prune are left to the next full prune (a failed prune's
// retry, or the periodic one), as they would be had they been written
// just after it.

import (
	"github.com/lbstate/lbstate/bpf"
)

// leftovers are the entries that restore read and no frontend restored
// from a master entry accounts for, and the entries restore counted in
// each map.
type leftovers struct {
	services []bpf.ServiceKey
	// scanServices says that lb_services held a key that a frontend's
	// state does not give back (bpf.NewServiceKey of its address and
	// slot): its state's deletes would miss it, so the prune reads the
	// map again.
	scanServices bool
	revNat       []uint32
	maglev       []uint32
	sourceRanges []bpf.SourceRangeKey
	// backends are the IDs of the lb_backends entries restore dropped
	// for another ID of the same address, with that address.
	backends []leftoverBackend

	counted entries
	// exact says that what restore counted is what the restored states
	// say may be in each map, and that nothing is left over: the counts
	// then follow the states, as after any write, and the first prune
	// need not count the maps again (Prune; at 100,000 x 10, reading
	// lb_services alone costs 0.35 s).
	exact bool
}

// none reports whether restore found no entry that its states do not
// account for.
func (l *leftovers) none() bool {
	return len(l.services) == 0 && !l.scanServices && len(l.revNat) == 0 && len(l.maglev) == 0 &&
		len(l.sourceRanges) == 0 && len(l.backends) == 0
}

// restoredMay returns what the restored states say may be in each map,
// as the room counts it from here on (setSlots, setMay, and one per
// source range). A slot restore did not read (a hole below a frontend's
// last slot) is counted: it may be written.
func (o *ops) restoredMay() entries {
	var e entries
	count := func(st *frontendState) {
		e[roomServices] += bpf.SlotEntries(int(st.slots)) + oneIf(st.hasMaster)
		e[roomRevNat] += oneIf(st.hasRevNat)
		e[roomMaglev] += oneIf(st.maglev)
		e[roomSourceRanges] += len(st.ranges())
	}
	for _, i := range o.restoredFrontends.all() {
		count(o.feStates.at(i))
	}
	for _, is := range o.restoredRevNat {
		for _, i := range is {
			count(o.feStates.at(i))
		}
	}
	// Every backend restore read is in lb_backends (inMap): they are
	// counted, not looked at (a million at 100,000 x 10).
	e[roomBackends] = o.backends.len() + o.restoredBackends.len()
	return e
}

func oneIf(b bool) int {
	if b {
		return 1
	}
	return 0
}

type leftoverBackend struct {
	id  uint32
	key addrKey
}

// servicesOf lists the lb_services entries of a restored frontend that
// restore drops: its slots and its master entry.
func (l *leftovers) servicesOf(k addrKey, st *frontendState, slots []restoredSlot) {
	addr := k.l3n4()
	if st.hasMaster {
		l.services = append(l.services, bpf.NewServiceKey(addr, 0))
	}
	for _, s := range slots {
		if bpf.HasEntry(int(s.slot)) { // the master holds the others
			l.services = append(l.services, bpf.NewServiceKey(addr, s.slot))
		}
	}
}

// pruneLeftovers deletes the leftovers that no frontend claims, but
// lb_backends' (pruneLeftoverBackends): the entries it deletes may name
// backends. lb_affinity, which the datapath writes, is read as a full
// prune reads it. Every map is counted again after it (Prune).
func (o *ops) pruneLeftovers(l *leftovers) error {
	byID := o.frontendsByID()
	if l.scanServices {
		if err := o.pruneServices(); err != nil {
			return err
		}
	} else {
		stale := l.services[:0]
		for _, k := range l.services {
			if st := o.frontend(keyOf(k.L3n4Addr())); !owns(st, k.Slot) {
				stale = append(stale, k)
			}
		}
		// Masters first, so that no master outlives its slots.
		sortServiceKeys(stale)
		if err := o.maps.Services.BatchDelete(stale); err != nil {
			return err
		}
	}
	if err := deleteLeftovers(o.maps.RevNat, l.revNat, func(id uint32) bool { return byID[id] != nil }); err != nil {
		return err
	}
	if err := deleteLeftovers(o.maps.SourceRanges, l.sourceRanges, func(k bpf.SourceRangeKey) bool {
		st := byID[k.RevNatID]
		k.RevNatID = 0
		return st != nil && st.hasRange(k)
	}); err != nil {
		return err
	}
	if err := o.pruneAffinity(byID); err != nil {
		return err
	}
	stale := l.maglev[:0]
	for _, id := range l.maglev {
		if st := byID[id]; st == nil || !st.maglev {
			stale = append(stale, id)
		}
	}
	for _, id := range stale {
		if err := o.maps.Maglev.Delete(id); err != nil {
			return err
		}
	}
	return nil
}

// pruneLeftoverBackends deletes the leftover lb_backends entries whose
// IDs no backend has and no slot names (named: droppedStillNamed).
func (o *ops) pruneLeftoverBackends(l *leftovers, named map[uint32]bool) error {
	var stale []uint32
	for _, b := range l.backends {
		if named[b.id] {
			continue
		}
		if i, ok := o.backends.get(b.key); !ok || o.beStates.at(i).id != b.id {
			stale = append(stale, b.id)
		}
	}
	return o.maps.Backends.BatchDelete(stale)
}

// deleteLeftovers deletes the keys of m that keep does not keep.
func deleteLeftovers[K comparable, V any](m bpf.Map[K, V], keys []K, keep func(K) bool) error {
	stale := keys[:0]
	for _, k := range keys {
		if !keep(k) {
			stale = append(stale, k)
		}
	}
	return m.BatchDelete(stale)
}
