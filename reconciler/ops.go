package reconciler

import (
	"bytes"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/internal/smallset"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/lb/maglev"
)

// ops writes frontends into the maps. statedb's reconciler calls it from
// one goroutine; the mutex is for readers (IDs, tests).
type ops struct {
	mu sync.Mutex
	// restored is closed once restore is done, restoreErr its error:
	// restore reads every pinned map (seconds of CPU at 100,000
	// services), so the cell runs it beside the sources' first listing,
	// and every entry point waits for it (lock).
	restored   chan struct{}
	restoreErr error

	maps *bpf.Maps
	cfg  settings
	log  *slog.Logger

	// The states of the frontends and backends, by address: arena
	// indexes into feStates and beStates (arena.go). A backend's state
	// keeps its address, so its index need not (keyIndex).
	frontends addrMap
	backends  keyIndex
	feStates  arena[frontendState]
	beStates  arena[backendState]
	feIDs     *idAllocator
	beIDs     *idAllocator

	// What the pinned maps held at start and no frontend has claimed yet,
	// and, until the tables are initialized, backends no frontend uses any
	// more (parked: their entries and IDs stay, so a source that has yet
	// to declare them gets them back).
	restoredFrontends addrMap
	restoredBackends  keyIndex
	// Frontends known only by their lb_rev_nat entry (lb_services was
	// recreated, or lost the master entry), by the whole frontend the
	// entry names, lowest ID first: that frontend takes the first, so
	// that its flows keep their rev-NAT ID. (More than one only if
	// entries of an older agent, which wrote no protocol and scope, name
	// the same address and port.)
	restoredRevNat map[addrKey][]uint32
	// IDs found in the maps at start that no master entry accounts for;
	// kept out of use until the first prune has cleaned up after them.
	orphanFrontendIDs, orphanBackendIDs []uint32
	// droppedBackends are the backend IDs that restore found beside
	// another ID of the same address and dropped, by address, until a
	// prune finds no slot naming them (droppedStillNamed).
	droppedBackends map[uint32]addrKey
	// leftovers are the entries restore read that no restored frontend
	// accounts for, until the first prune (leftovers.go).
	leftovers *leftovers

	// initialized is set once the frontends table is initialized (every
	// source has synced); from then on unused backends are deleted, not
	// parked. tableInitialized asks the table.
	initialized      bool
	tableInitialized func(statedb.ReadTxn) bool

	// requestPrune asks statedb's reconciler for a prune; a failed prune
	// asks again after pruneBackoff.
	requestPrune func()
	pruneBackoff time.Duration
	// stopped is set when the hive stops: a timer that fires later
	// (checkDropped) writes nothing, as a new agent may own the maps.
	stopped bool
	// droppedCheckDue says that a checkDropped timer is set.
	droppedCheckDue bool

	// room counts the entries in the maps; waiting holds the frontends
	// that did not fit, and kick asks statedb's reconciler to retry some
	// of them now (waiting.go).
	room      room
	waiting   map[lb.L3n4Addr]*waiter
	waitOrder []*waiter // the waiting, by ID
	kick      func([]lb.L3n4Addr)
	// idWaiting holds the frontends that got no ID, lb_rev_nat's slots
	// being held; idReserved the slots held for some of them (idwait.go).
	idWaiting   map[lb.L3n4Addr]*idWaiter
	idWaitOrder []*idWaiter // the waiting for an ID, as they came
	idReserved  int

	// failing holds the frontends whose last reconciliation failed;
	// onFailure is called when one starts failing (metrics.go).
	failing   map[lb.L3n4Addr]struct{}
	onFailure func()
	// overSlots holds the slot count logged for each frontend with more
	// slots than the datapath takes, so that it is logged once per change.
	overSlots map[lb.L3n4Addr]int

	// moreViews holds, by backend ID, the views of the backends that
	// more than one frontend uses, but the first (backendState.first).
	moreViews map[uint32][]backendView

	// scratch holds the slices that a batch's map operations are built
	// in, for the next batch to reuse.
	scratch scratch

	// call counts the calls of update and delete, so that a backend
	// knows the one that created it (backendState.born).
	call uint32

	// writes counts the entries written to each map (writes.go).
	writes mapWrites
}

// newOps returns the ops with what the pinned maps hold restored.
func newOps(maps *bpf.Maps, cfg settings, log *slog.Logger, frontends statedb.Table[*lb.Frontend]) (*ops, error) {
	o := newUnrestoredOps(maps, cfg, log, frontends)
	o.finishRestore(o.restore())
	return o, o.restoreErr
}

// newUnrestoredOps returns the ops, whose entry points wait until
// finishRestore is called.
func newUnrestoredOps(maps *bpf.Maps, cfg settings, log *slog.Logger, frontends statedb.Table[*lb.Frontend]) *ops {
	var writes mapWrites
	maps = countWrites(maps, &writes)
	o := &ops{
		writes: writes,
		tableInitialized: func(txn statedb.ReadTxn) bool {
			init, _ := frontends.Initialized(txn)
			return init
		},
		maps:              maps,
		cfg:               cfg,
		log:               log,
		frontends:         newAddrMap(),
		feIDs:             newIDAllocator("frontend", maps.RevNat.Name(), slotsOf(maps, maps.RevNat.Name())),
		beIDs:             newIDAllocator("backend", maps.Backends.Name(), slotsOf(maps, maps.Backends.Name())),
		restoredFrontends: newAddrMap(),
		restoredRevNat:    map[addrKey][]uint32{},
		room:              newRoom(maps),
		waiting:           map[lb.L3n4Addr]*waiter{},
		idWaiting:         map[lb.L3n4Addr]*idWaiter{},
		failing:           map[lb.L3n4Addr]struct{}{},
		restored:          make(chan struct{}),
	}
	backendKey := func(i uint32) addrKey { return o.beStates.at(i).key }
	o.backends, o.restoredBackends = newKeyIndex(backendKey), newKeyIndex(backendKey)
	return o
}

// finishRestore records restore's result and lets the entry points in.
func (o *ops) finishRestore(err error) {
	o.restoreErr = err
	close(o.restored)
}

// lock waits for restore, then locks o.mu. It returns restore's error:
// the ops then write nothing, as without what the maps held a write
// would hand the IDs of live flows to others.
func (o *ops) lock() error {
	<-o.restored
	o.mu.Lock()
	return o.restoreErr
}

// slotsOf returns the max_entries of the dense ID map called name.
func slotsOf(maps *bpf.Maps, name string) uint32 {
	c, _ := maps.Capacity(name)
	return uint32(c.MaxEntries)
}

// claimFrontend returns the frontend's state, adopting what the pinned
// maps held for its address, or allocating a new ID.
func (o *ops) claimFrontend(addr lb.L3n4Addr) (*frontendState, error) {
	k := keyOf(addr)
	if i, ok := o.frontends.get(k); ok {
		return o.feStates.at(i), nil
	}
	i, ok := o.restoredFrontends.get(k)
	if !ok && len(o.restoredRevNat) > 0 { // (empty once restore's leftovers are claimed: no key to make)
		i, ok = o.claimRestoredRevNat(k)
	}
	if !ok && len(o.restoredRevNat) > 0 {
		// An older agent's lb_rev_nat entry has no protocol or scope
		// (zero, read as ANY and external): its frontend takes it,
		// which the rewrite of the entry then completes.
		i, ok = o.claimRestoredRevNat(keyOf(lb.NewL3n4Addr(lb.ProtoAny, addr.Addr(), addr.Port(), lb.ScopeExternal)))
	}
	if ok {
		o.restoredFrontends.del(k) // its backends' references were counted at restore
	} else {
		if err := o.mayTakeID(addr); err != nil {
			return nil, err
		}
		id, err := o.feIDs.alloc()
		if err != nil {
			return nil, fmt.Errorf("frontend %s: %w", addr, err)
		}
		i, _ = o.newFrontendState(id)
	}
	o.frontends.set(k, i)
	return o.feStates.at(i), nil
}

// claimRestoredRevNat takes the lowest-ID frontend state restored from
// lb_rev_nat alone for k, if any.
func (o *ops) claimRestoredRevNat(k addrKey) (uint32, bool) {
	is := o.restoredRevNat[k]
	if len(is) == 0 {
		return 0, false
	}
	if o.restoredRevNat[k] = is[1:]; len(is) == 1 {
		delete(o.restoredRevNat, k)
	}
	return is[0], true
}

// newFrontendState returns a new frontend state, and its arena index.
func (o *ops) newFrontendState(id uint32) (uint32, *frontendState) {
	i, st := o.feStates.alloc()
	st.id = id
	return i, st
}

// forgetFrontend drops the state of a frontend that is gone.
func (o *ops) forgetFrontend(addr lb.L3n4Addr) {
	k := keyOf(addr)
	if i, ok := o.frontends.get(k); ok {
		o.frontends.del(k)
		o.feStates.release(i)
	}
}

// frontend returns the state of a frontend in o.frontends, or nil.
func (o *ops) frontend(k addrKey) *frontendState {
	if i, ok := o.frontends.get(k); ok {
		return o.feStates.at(i)
	}
	return nil
}

// claimBackend returns the state of the backend at k and its arena
// index, counting st's reference once.
func (o *ops) claimBackend(st *frontendState, k hashedKey) (uint32, *backendState, error) {
	if i, be := o.heldBackend(st, k.k); be != nil {
		return i, be, nil // held: in o.backends, its reference counted
	}
	i, be := o.adoptBackend(k)
	if be == nil {
		id, err := o.beIDs.alloc()
		if err != nil {
			return 0, nil, fmt.Errorf("backend %s: %w", k.k.l3n4(), err)
		}
		i, be = o.beStates.alloc()
		be.key, be.id, be.born = k.k, id, o.call
		o.backends.add(k.h, i) // not there: adoptBackend looked
	}
	if st.addBackend(i) {
		be.refs++
	}
	return i, be, nil
}

// heldScan is the most backends heldBackend looks through.
const heldScan = 16

// heldBackend returns the state of the backend at k that st holds a
// reference on, found among st's few backends rather than in the map of
// all of them, or nil: an update that keeps a frontend's backends, as
// every first update after a restart does, then looks up no address
// (at 100,000 x 10, a million lookups in a map of a million, twice).
func (o *ops) heldBackend(st *frontendState, k addrKey) (uint32, *backendState) {
	// The count first: backends() copies a set that has grown past a
	// slice, once per backend claimed (a 110-backend global service paid
	// 19% of clustermesh's watch CPU for it).
	if st.backendCount() > heldScan {
		return 0, nil
	}
	for _, i := range st.backends() {
		if be := o.beStates.at(i); be.key == k && be.refs > 0 {
			return i, be
		}
	}
	return 0, nil
}

// adoptBackend returns the state of a known backend and its arena index,
// taking a restored one over, or nil.
func (o *ops) adoptBackend(k hashedKey) (uint32, *backendState) {
	if i, ok := o.backends.getHashed(k.k, k.h); ok {
		return i, o.beStates.at(i)
	}
	i, ok := o.restoredBackends.getHashed(k.k, k.h)
	if !ok {
		return 0, nil
	}
	o.restoredBackends.del(k.k)
	o.backends.add(k.h, i)
	return i, o.beStates.at(i)
}

// writeMaglev computes and swaps in the frontend's Maglev table, unless
// the table in place was computed from the same backends and IDs
// (rotationIDs, those of rotation).
func (o *ops) writeMaglev(st *frontendState, rotation []lb.BackendRef, rotationIDs []uint32) error {
	mb := make([]maglev.Backend, len(rotation))
	ids := make(map[addrKey]uint32, len(rotation))
	for i, b := range rotation {
		mb[i] = maglev.Backend{Key: b.Address.Key(), Weight: b.Weight}
		if isReject(b) {
			mb[i].Key = rejectKey
		}
		ids[keyOf(b.Address)] = rotationIDs[i]
	}
	if k := st.maglevKnown(); st.maglev && k != nil && slices.EqualFunc(mb, k.input, sameMaglevBackend) && maps.Equal(ids, k.ids) {
		return nil
	}
	table, err := maglev.Compute(mb, o.maps.Maglev.TableSize(), o.cfg.maglevSeed)
	if err != nil {
		return err
	}
	for i, idx := range table {
		table[i] = ids[keyOf(rotation[idx].Address)]
	}
	if st.maglev && st.maglevKnown() == nil {
		// A table is there, of unknown content (restored, or after a
		// failure): one lookup spares rewriting an identical one.
		if old, ok, err := o.maps.Maglev.Lookup(st.id); err == nil && ok && slices.Equal(old, table) {
			st.setMaglevKnown(&maglevContent{mb, ids})
			return nil
		}
	}
	st.setMaglevKnown(nil)
	o.setMay(roomMaglev, &st.maglev, true) // from here on a table may exist
	if err := o.maps.Maglev.Update(st.id, table); err != nil {
		return err
	}
	st.setMaglevKnown(&maglevContent{mb, ids})
	return nil
}

func sameMaglevBackend(a, b maglev.Backend) bool {
	return a.Weight == b.Weight && bytes.Equal(a.Key, b.Key)
}

// rejectRef is the rotation's entry for a frontend's rejected share of
// the given weight: the zero address, which no backend has.
func rejectRef(weight uint16) lb.BackendRef {
	return lb.BackendRef{Weight: weight}
}

func isReject(b lb.BackendRef) bool { return b.Address == lb.L3n4Addr{} }

// rejectKey is the Maglev key of the rejected share: shorter than every
// backend's, so it is no backend's, and the same on every node.
var rejectKey = []byte("reject")

// kept are the backends whose IDs a frontend keeps: those it uses and
// those an override hides (Hidden), so that clearing the override gives
// back the entries, under the same IDs, that were there before it.
func kept(fe *lb.Frontend) []lb.BackendRef {
	if len(fe.Hidden()) == 0 {
		return fe.Backends
	}
	return slices.Concat(fe.Backends, fe.Hidden())
}

// writeSourceRanges makes the frontend's lb_src_range entries the wanted
// ones. Keys in want and st.ranges leave RevNatID 0; the map's carry the ID.
func (o *ops) writeSourceRanges(st *frontendState, want map[bpf.SourceRangeKey]struct{}) error {
	if len(want) == 0 && len(st.ranges()) == 0 {
		return nil // most frontends
	}
	withID := func(k bpf.SourceRangeKey) bpf.SourceRangeKey {
		k.RevNatID = st.id
		return k
	}
	for k := range want {
		if st.hasRange(k) {
			continue
		}
		if err := o.maps.SourceRanges.Update(withID(k), 1); err != nil {
			return err
		}
		st.addRange(k)
		o.use(roomSourceRanges, 1)
	}
	var stale []bpf.SourceRangeKey
	for _, k := range st.ranges() {
		if _, ok := want[k]; !ok {
			stale = append(stale, k)
		}
	}
	for _, k := range stale {
		if err := o.maps.SourceRanges.Delete(withID(k)); err != nil {
			return err
		}
		st.more.ranges.Remove(k)
		o.use(roomSourceRanges, -1)
	}
	return nil
}

// unused appends to dropped the arena indexes of the frontend's backends
// that are not among claimed (arena indexes, as writeBackends claimed the
// ones it keeps): indexes compared, not addresses, which would cost an
// address made from each backend's key and a search of them (a tenth of
// the reconciler's CPU at 50,000 x 10).
func (o *ops) unused(dropped []uint32, st *frontendState, claimed []uint32) []uint32 {
	kept := smallset.NewIndex(func(i *uint32) uint32 { return *i })
	for _, i := range st.backends() {
		if len(claimed) == 0 || !kept.Has(claimed, i) {
			dropped = append(dropped, i)
		}
	}
	return dropped
}

// droppedIDs returns the backend IDs of the arena indexes dropped.
func (o *ops) droppedIDs(dropped []uint32) map[uint32]bool {
	ids := make(map[uint32]bool, len(dropped))
	for _, i := range dropped {
		ids[o.beStates.at(i).id] = true
	}
	return ids
}

// releaseUnused drops the frontend's references to the backends dropped
// (unused), whose affinity entries are gone. The backends no frontend
// uses any more go to doomed, for deleteBackends.
func (o *ops) releaseUnused(st *frontendState, dropped []uint32, doomed *[]doomedBackend, t *task) error {
	for _, i := range dropped {
		be := o.beStates.at(i)
		o.dropView(be, st.id)
		switch {
		case be.refs > 1:
			if v := o.backendValue(be); !be.written || v != be.value {
				o.setMay(roomBackends, &be.inMap, true)
				if err := o.maps.Backends.Update(be.id, be.entry(v)); err != nil {
					return err
				}
				be.value, be.written = v, true
			}
			be.refs--
		case !o.initialized && be.born != o.call:
			// Park it: a source that has yet to sync may declare it again.
			// (Not one this call created, for a frontend taking back what
			// it wrote: nobody can have used it.)
			be.refs = 0
			o.backends.del(be.key)
			o.restoredBackends.set(be.key, i)
		default:
			be.refs = 0
			o.backends.del(be.key)
			*doomed = append(*doomed, doomedBackend{i, be, t})
		}
		st.removeBackend(i)
	}
	return nil
}

// doomedBackend is a backend no frontend uses any more (its arena index
// and state), and the task that let go of it last.
type doomedBackend struct {
	i  uint32
	be *backendState
	t  *task
}

// deleteBackends deletes the doomed backends in one batch and frees their
// IDs. If that fails, they are parked (entries and IDs kept) for a prune
// to delete, and the tasks that let go of them fail.
func (o *ops) deleteBackends(doomed []doomedBackend) {
	if len(doomed) == 0 {
		return
	}
	// Those whose entries hold what was written are deleted with it
	// (bpf.DeleteHolding), the others read first.
	ids, vals, unknown := take(&o.scratch.ids), take(&o.scratch.backends), []uint32(nil)
	for _, d := range doomed {
		if d.be.written {
			ids, vals = append(ids, d.be.id), append(vals, d.be.entry(d.be.value))
		} else {
			unknown = append(unknown, d.be.id)
		}
	}
	err := bpf.DeleteHolding(o.maps.Backends, ids, vals)
	if err == nil && len(unknown) > 0 {
		err = o.maps.Backends.BatchDelete(unknown)
	}
	giveBack(&o.scratch.ids, ids)
	giveBack(&o.scratch.backends, vals)
	if err != nil {
		for _, d := range doomed {
			// Some may be gone already: whoever takes one back writes it.
			d.be.written = false
			o.restoredBackends.set(d.be.key, d.i)
			d.t.err = firstErr(d.t.err, err)
		}
		if o.requestPrune != nil {
			time.AfterFunc(pruneRetryMin, o.requestPrune)
		}
		return
	}
	for _, d := range doomed {
		o.setMay(roomBackends, &d.be.inMap, false)
		o.releaseBackend(d.i, d.be)
	}
}

// releaseBackend frees the ID and the state of a backend that is gone
// from lb_backends.
func (o *ops) releaseBackend(i uint32, be *backendState) {
	o.beIDs.free(be.id)
	delete(o.moreViews, be.id) // empty unless a view was left behind
	o.beStates.release(i)
}

// clearAffinity deletes, in one walk of lb_affinity, the affinity entries
// of the frontends (by ID) in clear whose backend ID clear's function for
// them says (every entry for nil).
func (o *ops) clearAffinity(clear map[uint32]func(backendID uint32) bool) error {
	all := true // every entry of frontends whose master is gone: none is pinned again
	for _, stale := range clear {
		all = all && stale == nil
	}
	return o.deletePinsWhere(all, func(k bpf.AffinityKey, v bpf.AffinityValue) bool {
		stale, ok := clear[k.RevNatID]
		return ok && (stale == nil || stale(v.BackendID))
	})
}

// deletePinsWhere deletes, in one walk of lb_affinity, the entries match
// says. A pin the walk found void is what the datapath replaces when the
// client's next flow comes, maybe between the walk and the deletion: so
// each is deleted in one step with its read, and one match no longer
// says is written back (bpf.DeleteStale), unless gone says that no
// client is pinned again (deleted frontends), for which one batch
// deletes them all.
func (o *ops) deletePinsWhere(gone bool, match func(bpf.AffinityKey, bpf.AffinityValue) bool) error {
	var stale []bpf.AffinityKey
	err := o.maps.Affinity.Iterate(func(k bpf.AffinityKey, v bpf.AffinityValue) bool {
		if match(k, v) {
			stale = append(stale, k)
		}
		return true
	})
	if err != nil || len(stale) == 0 {
		return err
	}
	if gone {
		return o.maps.Affinity.BatchDelete(stale)
	}
	_, err = bpf.DeleteStale(o.maps.Affinity, stale, match)
	return err
}

// sourceRanges returns the source range keys of a frontend (RevNatID left
// 0): loadBalancerSourceRanges restrict the load balancer's addresses, as
// in kube-proxy, not node ports or external IPs.
func sourceRanges(fe *lb.Frontend) map[bpf.SourceRangeKey]struct{} {
	if fe.Type != lb.SVCTypeLoadBalancer || fe.Address.Scope() != lb.ScopeExternal || len(fe.Policy.SourceRanges) == 0 {
		return nil
	}
	out := make(map[bpf.SourceRangeKey]struct{}, len(fe.Policy.SourceRanges))
	for _, p := range fe.Policy.SourceRanges {
		out[bpf.NewSourceRangeKey(0, p)] = struct{}{}
	}
	return out
}

// ids returns the frontend and backend IDs in use, for tests.
func (o *ops) ids() (frontends, backends map[lb.L3n4Addr]uint32) {
	o.lock()
	defer o.mu.Unlock()
	frontends = make(map[lb.L3n4Addr]uint32, o.frontends.len())
	for k, i := range o.frontends.all() {
		frontends[k.l3n4()] = o.feStates.at(i).id
	}
	backends = make(map[lb.L3n4Addr]uint32, o.backends.len())
	for k, i := range o.backends.all() {
		backends[k.l3n4()] = o.beStates.at(i).id
	}
	return frontends, backends
}
