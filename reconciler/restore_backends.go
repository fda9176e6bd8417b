package reconciler

// Restore's reading of lb_backends, which runs beside the reading of the
// frontends' maps (readPinnedMaps).

import (
	"github.com/lbstate/lbstate/bpf"
)

// restoredBackendIDs are the backends restore read: their arena indexes
// by ID, the address of each ID dropped for another of its address, and,
// until keepNamedBackends, the entries read for an address read before.
type restoredBackendIDs struct {
	index   *idIndex
	dropped map[uint32]addrKey
	twins   []backendTwin
}

// backendTwin is an lb_backends entry whose address an entry read before
// it has.
type backendTwin struct {
	id    uint32
	key   addrKey
	value bpf.Backend
}

// readBackends reads lb_backends, reserving their IDs, into o.backends,
// where restoreReferences finds them, and returns their arena indexes by
// ID. It touches no frontend's state: it runs beside the reading of the
// frontends' maps, so that which of two IDs of one address stays is
// decided after both (keepNamedBackends); the first read stays until then.
func (o *ops) readBackends() (restoredBackendIDs, error) {
	r := restoredBackendIDs{index: newIDIndex(o.beIDs.slots), dropped: map[uint32]addrKey{}}
	// The backends are not counted yet: the mark the allocator resumed
	// from is past every ID handed out before, and each holds a slot.
	o.backends.presize(int(min(o.beIDs.mark, o.beIDs.slots)))
	l := o.leftovers
	err := o.maps.Backends.Iterate(func(id uint32, v bpf.Backend) bool {
		l.counted[roomBackends]++
		k := keyOf(v.L3n4Addr())
		o.beIDs.reserve(id)
		if _, twin := o.backends.get(k); twin {
			r.twins = append(r.twins, backendTwin{id, k, v})
			return true
		}
		i, be := o.beStates.alloc()
		*be = backendState{key: k, id: id, value: valueOf(v), written: true, inMap: true}
		o.backends.set(k, i)
		r.index.set(id, i)
		return true
	})
	return r, err
}

// keepNamedBackends decides, for each address that lb_backends holds
// under two IDs (a backend whose delete failed, and that a frontend took
// back under a new ID, before a restart), which one stays: one that
// restored slots name, so that their flows keep their backend ID, else
// the first read. The other's entry is left to the prune (an unknown
// ID), its ID kept out of new hands until then. Slots naming the other
// still count a reference on the address (restoredBackendIDs.dropped),
// as their update rewrites them.
func (o *ops) keepNamedBackends(slots *restoredSlots, r *restoredBackendIDs) {
	if len(r.twins) == 0 {
		return
	}
	named := newIDIndex(o.beIDs.slots)
	for _, ss := range slots.all {
		for _, s := range ss {
			named.set(s.backendID, 0)
		}
	}
	l := o.leftovers
	drop := func(id uint32, k addrKey) {
		o.orphanBackendIDs = append(o.orphanBackendIDs, id)
		l.backends = append(l.backends, leftoverBackend{id, k})
		r.dropped[id] = k
	}
	for _, t := range r.twins {
		i, _ := o.backends.get(t.key)
		held := o.beStates.at(i)
		if named.has(held.id) || !named.has(t.id) {
			drop(t.id, t.key)
			continue
		}
		drop(held.id, t.key)
		r.index.del(held.id)
		*held = backendState{key: t.key, id: t.id, value: valueOf(t.value), written: true, inMap: true}
		r.index.set(t.id, i)
	}
	r.twins = nil
}

// at returns the arena index of the backend whose entry has the ID, or
// had it (dropped).
func (r restoredBackendIDs) at(o *ops, id uint32) (uint32, bool) {
	if i, ok := r.index.get(id); ok {
		return i, true
	}
	if k, ok := r.dropped[id]; ok {
		return o.backends.get(k)
	}
	return 0, false
}

// has reports whether lb_backends held the ID.
func (r restoredBackendIDs) has(id uint32) bool {
	_, dropped := r.dropped[id]
	return dropped || r.index.has(id)
}
