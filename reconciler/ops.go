package reconciler

import (
	"bytes"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
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
	mu   sync.Mutex
	maps *bpf.Maps
	cfg  settings
	log  *slog.Logger

	frontends map[lb.L3n4Addr]*frontendState
	backends  map[lb.L3n4Addr]*backendState
	feIDs     *idAllocator
	beIDs     *idAllocator

	// What the pinned maps held at start and no frontend has claimed yet,
	// and, until the tables are initialized, backends no frontend uses any
	// more (parked: their entries and IDs stay, so a source that has yet
	// to declare them gets them back).
	restoredFrontends map[lb.L3n4Addr]*frontendState
	restoredBackends  map[lb.L3n4Addr]*backendState
	// Frontends known only by their lb_rev_nat entry, which holds an
	// address and port (lb_services was recreated, or lost the master
	// entry), lowest ID first: a frontend with that address and port
	// takes the first, so that its flows keep their rev-NAT ID.
	restoredRevNat map[netip.AddrPort][]*frontendState
	// IDs found in the maps at start that no master entry accounts for;
	// kept out of use until the first prune has cleaned up after them.
	orphanFrontendIDs, orphanBackendIDs []uint32

	// initialized is set once the frontends table is initialized (every
	// source has synced); from then on unused backends are deleted, not
	// parked. tableInitialized asks the table.
	initialized      bool
	tableInitialized func(statedb.ReadTxn) bool

	// requestPrune asks statedb's reconciler for a prune; a failed prune
	// asks again after pruneBackoff.
	requestPrune func()
	pruneBackoff time.Duration

	// room counts the entries in the maps; waiting holds the frontends
	// that did not fit, and kick asks statedb's reconciler to retry some
	// of them now (waiting.go).
	room      room
	waiting   map[lb.L3n4Addr]*waiter
	waitOrder []*waiter // the waiting, by ID
	kick      func([]lb.L3n4Addr)

	// call counts the calls of update and delete, so that a backend
	// knows the one that created it (backendState.born).
	call uint32
}

// frontendState is what may be in the maps for one frontend, and what is
// known to be there, so that an update writes only what changed.
type frontendState struct {
	// (Fields ordered so that the struct packs into 112 bytes.)
	id uint32
	// Known contents, nil or zero when unknown (after a failure, or for a
	// restored frontend): master is slot 0, if masterWritten.
	master                       bpf.ServiceValue
	masterWritten, revNatWritten bool // lb_services slot 0, lb_rev_nat entry
	// hasMaster says that a master entry may exist (the frontend may be in
	// service), hasRevNat a rev-NAT entry; they count in room.go.
	hasMaster, hasRevNat bool
	maglev               bool // a Maglev table may exist
	affinity             bool // affinity entries may exist
	// backends are the backends whose IDs this frontend's entries may
	// name. While an update is under way it holds the old and the new
	// backends; they are released only once nothing names them.
	backends smallset.Set[lb.L3n4Addr]
	slots    int // slots 1..slots may exist
	// ranges are the lb_src_range entries that may exist; nil for the
	// frontends (most) that have none.
	ranges      *smallset.Set[bpf.SourceRangeKey]
	written     []uint32       // known: backend IDs of slots 1..len(written)
	maglevKnown *maglevContent // known: what the Maglev table holds
}

// maglevContent is what a frontend's Maglev table was computed from.
type maglevContent struct {
	input []maglev.Backend
	ids   map[lb.L3n4Addr]uint32 // the IDs it names
}

// addRange records that the frontend's lb_src_range entry k may exist.
func (st *frontendState) addRange(k bpf.SourceRangeKey) {
	if st.ranges == nil {
		st.ranges = &smallset.Set[bpf.SourceRangeKey]{}
	}
	st.ranges.Add(k)
}

// hasRange reports whether the frontend's lb_src_range entry k may exist.
func (st *frontendState) hasRange(k bpf.SourceRangeKey) bool {
	return st.ranges != nil && st.ranges.Has(k)
}

type backendState struct {
	// (Fields ordered so that the struct packs into 128 bytes.)
	id   uint32
	born uint32 // the ops call that created it
	refs int32  // frontends whose backends include this one
	// The frontends' views of the backend; the lb_backends value is
	// derived from all of them (backendValue). The first is kept inline
	// (firstView is its frontend's ID, 0 for none: IDs start at 1), as
	// most backends serve one frontend; moreViews hold the others.
	firstView uint32
	value     bpf.Backend
	written   bool // value is in lb_backends
	inMap     bool // an lb_backends entry may exist
	firstRef  lb.BackendRef
	moreViews []backendView
}

// backendValue is the lb_backends value of a backend: the most available
// state any frontend sees it in, and the cluster and zone as the frontend
// with the lowest ID sees them, so that it does not depend on which
// frontend was reconciled last.
func (o *ops) backendValue(be *backendState) bpf.Backend {
	var (
		first   lb.BackendRef
		firstID uint32
		state   lb.BackendState
	)
	for v := range be.views() {
		// States are numbered from the most available; starting from the
		// first view, not from a fixed "least available" state, keeps a
		// state numbered after it (not-ready) from being read as that one.
		if firstID == 0 || v.ref.State < state {
			state = v.ref.State
		}
		if firstID == 0 || v.frontend < firstID {
			first, firstID = v.ref, v.frontend
		}
	}
	first.State = state
	return bpf.NewBackend(first, o.cfg.zoneIDs[first.Zone])
}

func newOps(maps *bpf.Maps, cfg settings, log *slog.Logger, frontends statedb.Table[*lb.Frontend]) (*ops, error) {
	o := &ops{
		tableInitialized: func(txn statedb.ReadTxn) bool {
			init, _ := frontends.Initialized(txn)
			return init
		},
		maps:              maps,
		cfg:               cfg,
		log:               log,
		frontends:         map[lb.L3n4Addr]*frontendState{},
		backends:          map[lb.L3n4Addr]*backendState{},
		feIDs:             newIDAllocator("frontend"),
		beIDs:             newIDAllocator("backend"),
		restoredFrontends: map[lb.L3n4Addr]*frontendState{},
		restoredBackends:  map[lb.L3n4Addr]*backendState{},
		restoredRevNat:    map[netip.AddrPort][]*frontendState{},
		room:              newRoom(maps),
		waiting:           map[lb.L3n4Addr]*waiter{},
	}
	return o, o.restore()
}

// claimFrontend returns the frontend's state, adopting what the pinned
// maps held for its address, or allocating a new ID.
func (o *ops) claimFrontend(addr lb.L3n4Addr) (*frontendState, error) {
	if st, ok := o.frontends[addr]; ok {
		return st, nil
	}
	st, ok := o.restoredFrontends[addr]
	if ok {
		delete(o.restoredFrontends, addr) // its backends' references were counted at restore
	} else if sts := o.restoredRevNat[addr.AddrPort()]; len(sts) > 0 {
		st = sts[0]
		if o.restoredRevNat[addr.AddrPort()] = sts[1:]; len(sts) == 1 {
			delete(o.restoredRevNat, addr.AddrPort())
		}
	} else {
		id, err := o.feIDs.alloc()
		if err != nil {
			return nil, fmt.Errorf("frontend %s: %w", addr, err)
		}
		st = newFrontendState(id)
	}
	o.frontends[addr] = st
	return st, nil
}

func newFrontendState(id uint32) *frontendState {
	return &frontendState{id: id}
}

// claimBackend returns the backend's state, counting st's reference once.
func (o *ops) claimBackend(st *frontendState, addr lb.L3n4Addr) (*backendState, error) {
	be := o.adoptBackend(addr)
	if be == nil {
		id, err := o.beIDs.alloc()
		if err != nil {
			return nil, fmt.Errorf("backend %s: %w", addr, err)
		}
		be = &backendState{id: id, born: o.call}
		o.backends[addr] = be
	}
	if st.backends.Add(addr) {
		be.refs++
	}
	return be, nil
}

// adoptBackend returns the state of a known backend, taking a restored
// one over, or nil.
func (o *ops) adoptBackend(addr lb.L3n4Addr) *backendState {
	if be, ok := o.backends[addr]; ok {
		return be
	}
	be, ok := o.restoredBackends[addr]
	if ok {
		delete(o.restoredBackends, addr)
		o.backends[addr] = be
	}
	return be
}

// writeMaglev computes and swaps in the frontend's Maglev table, unless
// the table in place was computed from the same backends and IDs.
func (o *ops) writeMaglev(st *frontendState, rotation []lb.BackendRef) error {
	mb := make([]maglev.Backend, len(rotation))
	ids := make(map[lb.L3n4Addr]uint32, len(rotation))
	for i, b := range rotation {
		mb[i] = maglev.Backend{Key: b.Address.Key(), Weight: b.Weight}
		if isReject(b) {
			mb[i].Key = rejectKey
		}
		ids[b.Address] = o.slotID(b)
	}
	if k := st.maglevKnown; st.maglev && k != nil && slices.EqualFunc(mb, k.input, sameMaglevBackend) && maps.Equal(ids, k.ids) {
		return nil
	}
	table, err := maglev.Compute(mb, o.maps.Maglev.TableSize(), o.cfg.maglevSeed)
	if err != nil {
		return err
	}
	for i, idx := range table {
		table[i] = ids[rotation[idx].Address]
	}
	st.maglevKnown = nil
	o.setMay(roomMaglev, &st.maglev, true) // from here on a table may exist
	if err := o.maps.Maglev.Update(st.id, table); err != nil {
		return err
	}
	st.maglevKnown = &maglevContent{mb, ids}
	return nil
}

func sameMaglevBackend(a, b maglev.Backend) bool {
	return a.Weight == b.Weight && bytes.Equal(a.Key, b.Key)
}

// slotIDs lays out the backend IDs of slots 1..n: the rotation (weighted
// for random, one each for Maglev, whose table carries the weights), the
// standby backends, then the fallback ones.
func (o *ops) slotIDs(j *task) []uint32 {
	ids := make([]uint32, 0, j.slotCount)
	for i, b := range j.rotation {
		id := o.slotID(b)
		ids = append(ids, id)
		if j.slotCounts != nil {
			for range j.slotCounts[i] - 1 {
				ids = append(ids, id)
			}
		}
	}
	for _, b := range slices.Concat(j.standby, j.fallback) {
		ids = append(ids, o.backends[b.Address].id)
	}
	return ids
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

// slotID is the backend ID that a slot of b names.
func (o *ops) slotID(b lb.BackendRef) uint32 {
	if isReject(b) {
		return bpf.BackendReject
	}
	return o.backends[b.Address].id
}

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
	if len(want) == 0 && st.ranges == nil {
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
	if st.ranges != nil {
		for _, k := range st.ranges.Items() {
			if _, ok := want[k]; !ok {
				stale = append(stale, k)
			}
		}
	}
	for _, k := range stale {
		if err := o.maps.SourceRanges.Delete(withID(k)); err != nil {
			return err
		}
		st.ranges.Remove(k)
		o.use(roomSourceRanges, -1)
	}
	if st.ranges != nil && st.ranges.Len() == 0 {
		st.ranges = nil
	}
	return nil
}

// releaseUnused drops the frontend's references to backends it no longer
// uses, clearing their affinity entries. The backends no frontend uses any
// more go to doomed, for deleteBackends.
func (o *ops) releaseUnused(st *frontendState, keep []lb.BackendRef, doomed *[]doomedBackend, t *task) error {
	kept := smallset.NewIndex(func(b *lb.BackendRef) lb.L3n4Addr { return b.Address })
	var dropped []lb.L3n4Addr
	for _, addr := range st.backends.Items() {
		if !kept.Has(keep, addr) {
			dropped = append(dropped, addr)
		}
	}
	if len(dropped) == 0 {
		return nil
	}
	if st.affinity {
		ids := make(map[uint32]bool, len(dropped))
		for _, addr := range dropped {
			ids[o.backends[addr].id] = true
		}
		if err := o.clearAffinity(st.id, ids); err != nil {
			return err
		}
	}
	for _, addr := range dropped {
		be := o.backends[addr]
		be.dropView(st.id)
		switch {
		case be.refs > 1:
			if v := o.backendValue(be); !be.written || v != be.value {
				o.setMay(roomBackends, &be.inMap, true)
				if err := o.maps.Backends.Update(be.id, v); err != nil {
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
			delete(o.backends, addr)
			o.restoredBackends[addr] = be
		default:
			be.refs = 0
			delete(o.backends, addr)
			*doomed = append(*doomed, doomedBackend{addr, be, t})
		}
		st.backends.Remove(addr)
	}
	return nil
}

// doomedBackend is a backend no frontend uses any more, and the task
// that let go of it last.
type doomedBackend struct {
	addr lb.L3n4Addr
	be   *backendState
	t    *task
}

// deleteBackends deletes the doomed backends in one batch and frees their
// IDs. If that fails, they are parked (entries and IDs kept) for a prune
// to delete, and the tasks that let go of them fail.
func (o *ops) deleteBackends(doomed []doomedBackend) {
	if len(doomed) == 0 {
		return
	}
	ids := make([]uint32, len(doomed))
	for i, d := range doomed {
		ids[i] = d.be.id
	}
	if err := o.maps.Backends.BatchDelete(ids); err != nil {
		for _, d := range doomed {
			// Some may be gone already: whoever takes one back writes it.
			d.be.written = false
			o.restoredBackends[d.addr] = d.be
			d.t.err = firstErr(d.t.err, err)
		}
		if o.requestPrune != nil {
			time.AfterFunc(pruneRetryMin, o.requestPrune)
		}
		return
	}
	for _, d := range doomed {
		o.setMay(roomBackends, &d.be.inMap, false)
		o.beIDs.free(d.be.id)
	}
}

// clearAffinity deletes a frontend's affinity entries that name one of
// backendIDs (all of them when backendIDs is nil).
func (o *ops) clearAffinity(revNatID uint32, backendIDs map[uint32]bool) error {
	var stale []bpf.AffinityKey
	err := o.maps.Affinity.Iterate(func(k bpf.AffinityKey, v bpf.AffinityValue) bool {
		if k.RevNatID == revNatID && (backendIDs == nil || backendIDs[v.BackendID]) {
			stale = append(stale, k)
		}
		return true
	})
	if err != nil {
		return err
	}
	return o.maps.Affinity.BatchDelete(stale)
}

// flags returns the master entry's flags of a frontend; hasRanges says
// whether source ranges restrict it.
func flags(fe *lb.Frontend, hasRanges bool) uint8 {
	var f uint8
	p := fe.Policy
	// The flag names the policy that selection applied to this frontend.
	if p.TrafficPolicyFor(fe.FrontendParams) == lb.TrafficPolicyLocal {
		if fe.UsesExternalTrafficPolicy() {
			f |= bpf.FlagExtLocal
		} else {
			f |= bpf.FlagIntLocal
		}
	}
	if p.AffinityTimeout() > 0 {
		f |= bpf.FlagAffinity
	}
	if hasRanges {
		f |= bpf.FlagSourceRanges
	}
	if !fe.RedirectedTo().IsZero() {
		f |= bpf.FlagRedirected
		if fe.SkipFromBackend() {
			f |= bpf.FlagSkipFromBackend
		}
	}
	if fe.ProxyPort() != 0 {
		f |= bpf.FlagProxy
	}
	return f
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
	o.mu.Lock()
	defer o.mu.Unlock()
	frontends = make(map[lb.L3n4Addr]uint32, len(o.frontends))
	for addr, st := range o.frontends {
		frontends[addr] = st.id
	}
	backends = make(map[lb.L3n4Addr]uint32, len(o.backends))
	for addr, be := range o.backends {
		backends[addr] = be.id
	}
	return frontends, backends
}
