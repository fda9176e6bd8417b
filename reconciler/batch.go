package reconciler

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/internal/smallset"
	"github.com/lbstate/lbstate/lb"
)

// Frontends are written in phases, each phase for every frontend of a
// batch before the next, so that a batch costs a few batched syscalls
// instead of a few per frontend. The phases keep each frontend's write
// order, so a packet never sees a frontend half-written:
//  1. the backends it uses (lb_backends);
//  2. its Maglev table, swapped in whole;
//  3. its backend slots past the inline ones (bpf.InlineSlots);
//  4. its master entry, which holds the inline slots, and its
//     reverse-NAT entry (the master's count never exceeds the slots
//     present: slot entries are written before and deleted after it);
//  5. the surplus slot entries of a shrunk frontend;
//  6. a Maglev table it no longer needs, source ranges, affinity entries
//     of backends it dropped;
//  7. backends that no frontend uses any more.
//
// Before the first phase, admit (room.go, waiting.go) refuses the
// frontends that do not fit in the room left in the maps: they write
// nothing, and wait.
//
// A frontend whose write fails drops out of the later phases: what was
// written stays, with the state describing it, and statedb's retry of the
// frontend alone carries on from there. A failed batched syscall fails
// every frontend that had a part in it. The exception is a map the kernel
// found full (admit's counts were low): a frontend that was not in service
// then takes back what it wrote of itself (settle), so that its entries do
// not hold room that frontends that fit could use.

// maxSlots is the most backend slots a frontend can have: slots are
// numbered, and counted in the master entry, in 16 bits (bpf.ServiceKey,
// bpf.ServiceValue).
const maxSlots = math.MaxUint16

// task is one frontend of a batch.
type task struct {
	fe  *lb.Frontend
	st  *frontendState
	err error

	algorithm uint8
	useMaglev bool
	// wasServed says that the frontend had a master entry before this
	// update; refused that admit refused it for want of room in fullIn.
	wasServed, refused bool
	fullIn             roomMap

	rotation, standby []lb.BackendRef
	// fallback are the hidden backends that take new flows, for the
	// fallback slots of a redirect with SkipFromBackend (one slot each).
	fallback []lb.BackendRef
	// slotCounts are the slots of each backend in rotation (nil: one
	// each), slotCount the slots in all, standby ones included.
	slotCounts []int
	slotCount  int
	slotIDs    []uint32
	// claimed are the arena indexes of the backends this update claimed
	// (writeBackends): the frontend's other backends are the ones it
	// drops (unused).
	claimed []uint32
	// The backing arrays of a frontend with one backend and slot.
	slotBuf, idBuf [1]uint32
	ranges         map[bpf.SourceRangeKey]struct{}

	// in marks the batched syscalls of the phase under way that write
	// for this task (marks), so that the phase finds the tasks the
	// syscall's result is for without building a list of them;
	// keepSlots is deleteSurplusSlots' slot count to keep.
	in        marks
	keepSlots int
	// inlineChanged says that the slots the master entry holds
	// (bpf.InlineSlots) differ from what is known to be written.
	inlineChanged bool
	// voided says which of the frontend's affinity pins this update
	// voids (voidedPins); nil for none.
	voided func(backendID uint32) bool
}

// marks are the batched syscalls of a phase that a task has a part in.
type marks uint8

const (
	inSlots marks = 1 << iota
	inMaster
	inRevNat
	inSurplus
)

// marked yields the tasks that have a part in syscall m, failed or not,
// and clears their mark.
func marked(tasks []task, m marks) func(func(*task) bool) {
	return func(yield func(*task) bool) {
		for i := range tasks {
			j := &tasks[i]
			if j.in&m == 0 {
				continue
			}
			j.in &^= m
			if !yield(j) {
				return
			}
		}
	}
}

// Update writes one frontend; see UpdateBatch.
func (o *ops) Update(ctx context.Context, txn statedb.ReadTxn, rev statedb.Revision, fe *lb.Frontend) error {
	return o.runOne(txn, fe, o.update)
}

// UpdateBatch writes a batch of frontends (statedb's BatchOperations).
func (o *ops) UpdateBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[*lb.Frontend]) {
	o.runBatch(txn, batch, o.update)
}

// Delete removes one frontend; see DeleteBatch.
func (o *ops) Delete(ctx context.Context, txn statedb.ReadTxn, rev statedb.Revision, fe *lb.Frontend) error {
	return o.runOne(txn, fe, o.delete)
}

// DeleteBatch removes a batch of frontends, master entries first, so that
// the datapath stops matching a frontend before anything it names goes
// away.
func (o *ops) DeleteBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[*lb.Frontend]) {
	o.runBatch(txn, batch, o.delete)
}

// runOne runs fn over one frontend's task and returns its result.
func (o *ops) runOne(txn statedb.ReadTxn, fe *lb.Frontend, fn func(statedb.ReadTxn, []task)) error {
	err := o.lock()
	defer o.mu.Unlock()
	if err != nil {
		return err
	}
	tasks := []task{{fe: fe}}
	fn(txn, tasks)
	o.noteResults(tasks)
	o.compact()
	return tasks[0].err
}

// runBatch runs fn over a task per entry and records each task's result.
// The tasks are built in a slice kept for the next batch (a task is
// about 200 bytes); nothing keeps a pointer to one past fn.
func (o *ops) runBatch(txn statedb.ReadTxn, batch []reconciler.BatchEntry[*lb.Frontend], fn func(statedb.ReadTxn, []task)) {
	err := o.lock()
	defer o.mu.Unlock()
	if err != nil {
		for i := range batch {
			batch[i].Result = err
		}
		return
	}
	tasks := slices.Grow(take(&o.scratch.tasks), len(batch))[:len(batch)]
	for i := range batch {
		tasks[i].fe = batch[i].Object
	}
	fn(txn, tasks)
	o.noteResults(tasks)
	o.compact()
	for i := range batch {
		batch[i].Result = tasks[i].err
	}
	clear(tasks) // what they point to is the batch's
	giveBack(&o.scratch.tasks, tasks)
}

// compact gives back the room of the frontends and backends gone.
func (o *ops) compact() {
	o.frontends.compact()
	o.backends.compact()
	o.restoredFrontends.compact()
	o.restoredBackends.compact()
}

// noteResults records which frontends fail, counting those that start
// to: a frontend retried while it waits for room is one failure, not one
// per try.
func (o *ops) noteResults(tasks []task) {
	for i := range tasks {
		addr := tasks[i].fe.Address
		if tasks[i].err == nil {
			delete(o.failing, addr)
			delete(o.overSlots, addr)
			continue
		}
		if _, ok := o.failing[addr]; !ok {
			o.failing[addr] = struct{}{}
			if o.onFailure != nil {
				o.onFailure()
			}
		}
	}
}

// noteInitialized records that the tables are initialized, as of txn.
func (o *ops) noteInitialized(txn statedb.ReadTxn) {
	if !o.initialized && o.tableInitialized(txn) {
		o.initialized = true
	}
}

// live yields the tasks that have not failed.
func live(tasks []task) func(func(*task) bool) {
	return func(yield func(*task) bool) {
		for i := range tasks {
			if tasks[i].err == nil && !yield(&tasks[i]) {
				return
			}
		}
	}
}

// update writes the tasks' frontends; o.mu is held.
func (o *ops) update(txn statedb.ReadTxn, tasks []task) {
	o.noteInitialized(txn)
	o.call++

	o.prepare(tasks)
	o.admit(tasks)
	claimed := o.writeBackends(tasks, take(&o.scratch.claimed))
	defer func() { giveBack(&o.scratch.claimed, claimed) }()
	for j := range live(tasks) {
		if j.useMaglev { // one slot per backend in rotation, first
			j.err = o.writeMaglev(j.st, j.rotation, j.slotIDs[:len(j.rotation)])
		}
	}
	for j := range live(tasks) {
		j.voided = voidedPins(j) // before writeSlots forgets the old slots
	}
	o.writeSlots(tasks)
	o.writeMasters(tasks)
	o.deleteSurplusSlots(tasks, func(j *task) int { return len(j.slotIDs) })
	// The backends a frontend no longer uses: their affinity entries go
	// first, for the whole batch in one walk of lb_affinity, then the
	// references. The same walk removes the pins of backends that left
	// the new-flow slots (voidedPins).
	type drop struct {
		j      *task
		lo, hi int // its backends in dropped
	}
	var (
		drops  []drop
		sticky map[uint32]func(uint32) bool
	)
	dropped, doomed := take(&o.scratch.arenaIs), take(&o.scratch.doomed)
	defer func() { giveBack(&o.scratch.arenaIs, dropped) }()
	defer func() { giveBack(&o.scratch.doomed, clearAll(doomed)) }()
	for j := range live(tasks) {
		if j.st.maglev && !j.useMaglev {
			j.err = o.deleteMaglev(j.st)
		}
		if j.err == nil {
			j.err = o.writeSourceRanges(j.st, j.ranges)
		}
		if j.err != nil {
			continue
		}
		lo := len(dropped)
		var gone map[uint32]bool
		if dropped = o.unused(dropped, j.st, j.claimed); len(dropped) > lo {
			drops = append(drops, drop{j, lo, len(dropped)})
			if j.st.affinity {
				gone = o.droppedIDs(dropped[lo:])
			}
		}
		if gone != nil || j.voided != nil {
			if sticky == nil {
				sticky = map[uint32]func(uint32) bool{}
			}
			voided := j.voided
			sticky[j.st.id] = func(id uint32) bool { return gone[id] || (voided != nil && voided(id)) }
		}
	}
	if len(sticky) > 0 {
		if err := o.clearAffinity(sticky); err != nil {
			fail(tasks, err, func(j *task) bool { _, ok := sticky[j.st.id]; return ok })
		}
	}
	for _, d := range drops {
		if d.j.err == nil {
			d.j.err = o.releaseUnused(d.j.st, dropped[d.lo:d.hi], &doomed, d.j)
		}
	}
	o.deleteBackends(doomed)
	o.settle(tasks)
}

// delete removes the tasks' frontends; o.mu is held.
func (o *ops) delete(txn statedb.ReadTxn, tasks []task) {
	o.noteInitialized(txn)
	o.call++
	o.remove(tasks, true)
	for i := range tasks {
		if tasks[i].err != nil {
			o.room.stale = true // part of a batch may be gone
		}
	}
	o.offerRoom()
}

// prepare claims each frontend's state and ID, and lays it out.
func (o *ops) prepare(tasks []task) {
	for j := range live(tasks) {
		if j.st, j.err = o.claimFrontend(j.fe.Address); j.err != nil {
			continue
		}
		j.fe.ID = j.st.id
		j.wasServed = j.st.hasMaster
		j.layout(o)
	}
}

// remove deletes the frontends' entries and releases what they used. With
// forget, it also forgets the frontends and frees their IDs; without, they
// keep their IDs (a frontend taking back what it wrote, for want of room).
func (o *ops) remove(tasks []task, forget bool) {
	masters := take(&o.scratch.keys)
	for i := range tasks {
		j := &tasks[i]
		k := keyOf(j.fe.Address)
		j.st = o.frontend(k)
		if forget {
			o.stopIDWaiting(j.fe.Address) // one that got no ID has no state either
		}
		if _, restored := o.restoredFrontends.get(k); j.st == nil && !restored {
			continue // nothing to do
		}
		if forget {
			o.stopWaiting(j.fe.Address, false)
		}
		if j.st == nil {
			if j.st, j.err = o.claimFrontend(j.fe.Address); j.err != nil {
				continue
			}
		}
		j.st.masterWritten = false
		if j.st.hasMaster { // else there is none, and deleting it would cost a syscall
			masters = append(masters, bpf.NewServiceKey(j.fe.Address, 0))
		}
	}
	err := o.maps.Services.BatchDelete(masters)
	giveBack(&o.scratch.keys, masters)
	if err != nil {
		fail(tasks, err, func(j *task) bool { return j.st != nil })
	}
	for j := range live(tasks) {
		if j.st != nil {
			o.setMay(roomServices, &j.st.hasMaster, false)
		}
	}
	o.deleteSurplusSlots(tasks, func(*task) int { return 0 })
	doomed, dropped := take(&o.scratch.doomed), take(&o.scratch.arenaIs)
	defer func() { giveBack(&o.scratch.doomed, clearAll(doomed)) }()
	defer func() { giveBack(&o.scratch.arenaIs, dropped) }()
	// The entries known to hold what writeMasters wrote are deleted with
	// it (bpf.DeleteHolding), the others read first.
	known, knownVals, unknown := take(&o.scratch.ids), take(&o.scratch.revNats), []uint32(nil)
	for j := range live(tasks) {
		if j.st == nil {
			continue
		}
		if j.st.maglev {
			if j.err = o.deleteMaglev(j.st); j.err != nil {
				continue
			}
		}
		switch {
		case j.st.hasRevNat && j.st.revNatWritten:
			known, knownVals = append(known, j.st.id), append(knownVals, bpf.NewRevNatValue(j.fe.Address))
		case j.st.hasRevNat:
			unknown = append(unknown, j.st.id)
		}
		j.st.revNatWritten = false
	}
	err = bpf.DeleteHolding(o.maps.RevNat, known, knownVals)
	if err == nil && len(unknown) > 0 {
		err = o.maps.RevNat.BatchDelete(unknown)
	}
	giveBack(&o.scratch.ids, known)
	giveBack(&o.scratch.revNats, knownVals)
	if err != nil {
		fail(tasks, err, func(j *task) bool { return j.st != nil })
	}
	// Affinity entries of the whole batch go in one walk of lb_affinity.
	var sticky map[uint32]func(uint32) bool
	for j := range live(tasks) {
		if j.st == nil {
			continue
		}
		o.setMay(roomRevNat, &j.st.hasRevNat, false)
		if j.err = o.writeSourceRanges(j.st, nil); j.err == nil && j.st.affinity {
			if sticky == nil {
				sticky = map[uint32]func(uint32) bool{}
			}
			sticky[j.st.id] = nil // every entry
		}
	}
	if len(sticky) > 0 {
		err := o.clearAffinity(sticky)
		for j := range live(tasks) {
			if j.st == nil {
				continue
			}
			if _, ok := sticky[j.st.id]; ok {
				j.err = err
				j.st.affinity = err != nil
			}
		}
	}
	for j := range live(tasks) {
		if j.st == nil {
			continue
		}
		dropped = o.unused(dropped[:0], j.st, nil)
		j.err = o.releaseUnused(j.st, dropped, &doomed, j)
		if j.err == nil && forget {
			o.feIDs.free(j.st.id)
			o.room.freed = true // an ID's slot, for a frontend waiting for one
			o.forgetFrontend(j.fe.Address)
			j.st = nil
		}
	}
	o.deleteBackends(doomed)
}

// fail records err for the live tasks that had a part in a failed syscall.
func fail(tasks []task, err error, part func(*task) bool) {
	for j := range live(tasks) {
		if part(j) {
			j.err = err
		}
	}
}

// writeBackends claims each frontend's backends, counting its
// references, and makes every backend they use present in lb_backends
// with its current value. The arena indexes claimed are appended to
// claimed, each task's (task.claimed) in a part of it.
func (o *ops) writeBackends(tasks []task, claimed []uint32) []uint32 {
	touched := take(&o.scratch.touched)
	defer func() { giveBack(&o.scratch.touched, clearAll(touched)) }()
	keys := take(&o.scratch.keyed) // of one frontend's backends
	defer func() { giveBack(&o.scratch.keyed, keys) }()
	hidden := false // some frontend has hidden backends
	for j := range live(tasks) {
		hidden = hidden || len(j.fe.Hidden()) > 0
		// The selected backends first (a new one gets its ID before the
		// hidden ones, whether or not they come in the same update); a
		// backend both hidden and selected is seen as selected.
		selected := smallset.NewIndex(func(b *lb.BackendRef) lb.L3n4Addr { return b.Address })
		ids := j.idBuf[:0] // of kept(j.fe), in order
		if n := len(j.fe.Backends) + len(j.fe.Hidden()); n > len(j.idBuf) {
			ids = make([]uint32, 0, n)
			j.st.reserveBackends(n)
		}
		lo := len(claimed)
		keys = keys[:0]
		for _, ref := range kept(j.fe) {
			k := keyOf(ref.Address)
			keys = append(keys, hashedKey{k, hashKey(k)})
		}
		if n := j.st.backendCount(); n == 0 || n > heldScan { // else heldBackend finds most without a lookup
			o.backends.prefetch(keys)
		}
		for i, ref := range kept(j.fe) {
			at, be, err := o.claimBackend(j.st, keys[i])
			if err != nil {
				j.err = err
				break
			}
			claimed = append(claimed, at)
			if i < len(j.fe.Backends) || !selected.Has(j.fe.Backends, ref.Address) {
				o.setView(be, o.viewOf(j.st.id, ref))
			}
			touched = append(touched, be)
			ids = append(ids, be.id)
		}
		if j.err == nil {
			j.slotIDs = j.slotIDsOf(ids)
			// (A later append may move claimed: this part stays as it is.)
			j.claimed = claimed[lo:len(claimed):len(claimed)]
		}
	}
	ids, vals := take(&o.scratch.ids), take(&o.scratch.backends)
	defer func() { giveBack(&o.scratch.ids, ids) }()
	defer func() { giveBack(&o.scratch.backends, vals) }()
	todo := take(&o.scratch.pending)
	defer func() { giveBack(&o.scratch.pending, clearAll(todo)) }()
	// A backend is touched once per frontend that uses it, and once more
	// by a frontend that has it both selected and hidden; touched once,
	// it is written once.
	var seen map[*backendState]bool
	for _, be := range touched {
		if be.refs > 1 || hidden {
			if seen == nil {
				seen = map[*backendState]bool{}
			}
			if seen[be] {
				continue
			}
			seen[be] = true
		}
		if v := o.backendValue(be); !be.written || be.value != v {
			ids, vals, todo = append(ids, be.id), append(vals, be.entry(v)), append(todo, pendingBackend{be, v})
		}
	}
	for _, p := range todo {
		o.setMay(roomBackends, &p.be.inMap, true)
	}
	if err := o.maps.Backends.BatchUpdate(ids, vals); err != nil {
		for _, p := range todo {
			p.be.written = false // some may hold the new value, some the old
		}
		fail(tasks, err, func(*task) bool { return true })
		return claimed
	}
	for _, p := range todo {
		p.be.value, p.be.written = p.value, true
	}
	return claimed
}

// pendingBackend is a backend whose lb_backends entry is to hold value.
type pendingBackend struct {
	be    *backendState
	value beValue
}

// layout works out a frontend's algorithm, its backends in rotation and on
// standby, its slots, and its source ranges. A rejected share
// (Frontend.Rejected) is in rotation as a backend of its own, whose slots
// and Maglev elements name bpf.BackendReject.
func (j *task) layout(o *ops) {
	j.algorithm = o.cfg.algorithm(j.fe.Policy.Algorithm)
	if j.fe.Rejected() == 0 && !slices.ContainsFunc(j.fe.Backends, func(b lb.BackendRef) bool { return b.Weight == 0 }) {
		j.rotation = j.fe.Backends // the usual case: no copy (rotation is only read)
	} else {
		for _, b := range j.fe.Backends {
			if b.Weight > 0 {
				j.rotation = append(j.rotation, b)
			} else {
				j.standby = append(j.standby, b)
			}
		}
	}
	if j.fe.Rejected() > 0 {
		j.rotation = append(j.rotation, rejectRef(j.fe.Rejected()))
	}
	j.useMaglev = j.algorithm == bpf.AlgorithmMaglev && len(j.rotation) > 0
	j.ranges = sourceRanges(j.fe)
	j.slotCount = len(j.rotation)
	equal := !slices.ContainsFunc(j.rotation, func(b lb.BackendRef) bool { return b.Weight != j.rotation[0].Weight })
	// One backend gets one slot, and backends of equal weights one each
	// (what weightedSlots would say).
	if j.algorithm == bpf.AlgorithmRandom && len(j.rotation) > 1 && !equal {
		weights := make([]uint16, len(j.rotation))
		for i, b := range j.rotation {
			weights[i] = b.Weight
		}
		j.slotCounts = weightedSlots(weights, o.cfg.maxSlots)
		j.slotCount = 0
		for _, n := range j.slotCounts {
			j.slotCount += n
		}
	}
	if j.fe.SkipFromBackend() && !j.fe.RedirectedTo().IsZero() {
		for _, b := range j.fe.Hidden() {
			if b.Weight > 0 {
				j.fallback = append(j.fallback, b)
			}
		}
	}
	j.slotCount += len(j.standby) + len(j.fallback)
	if j.slotCount > maxSlots {
		j.err = fmt.Errorf("frontend %s: %d backend slots, at most %d", j.fe.Address, j.slotCount, maxSlots)
		// Status and metrics say it at every retry; the log once per count.
		if n, ok := o.overSlots[j.fe.Address]; !ok || n != j.slotCount {
			if o.overSlots == nil {
				o.overSlots = map[lb.L3n4Addr]int{}
			}
			o.overSlots[j.fe.Address] = j.slotCount
			o.log.Warn("Frontend needs more backend slots than the datapath takes; not written until it needs fewer",
				"service", j.fe.Service, "frontend", j.fe.Address, "slots", j.slotCount, "max", maxSlots,
				"rotation", len(j.rotation), "standby", len(j.standby), "fallback", len(j.fallback))
		}
	}
}

// slotIDsOf lays out the backend IDs of slots 1..n, given the IDs of
// kept(j.fe): the rotation (weighted for random, one each for Maglev,
// whose table carries the weights), the standby backends, then the
// fallback ones, as layout counted them.
func (j *task) slotIDsOf(ids []uint32) []uint32 {
	out := j.slotBuf[:0] // most frontends have one slot, which setWritten copies
	if j.slotCount > len(j.slotBuf) {
		out = make([]uint32, 0, j.slotCount)
	}
	inRotation := 0
	addRotation := func(id uint32) {
		n := 1
		if j.slotCounts != nil {
			n = j.slotCounts[inRotation]
		}
		inRotation++
		for range n {
			out = append(out, id)
		}
	}
	for i, b := range j.fe.Backends {
		if b.Weight > 0 {
			addRotation(ids[i])
		}
	}
	if j.fe.Rejected() > 0 {
		addRotation(bpf.BackendReject)
	}
	for i, b := range j.fe.Backends {
		if b.Weight == 0 {
			out = append(out, ids[i])
		}
	}
	if len(j.fallback) > 0 {
		for i, b := range j.fe.Hidden() {
			if b.Weight > 0 {
				out = append(out, ids[len(j.fe.Backends)+i])
			}
		}
	}
	return out
}

// writeSlots writes the slot entries whose backend ID changed, and notes
// whether the inline slots changed (writeMasters writes those).
func (o *ops) writeSlots(tasks []task) {
	keys, vals := take(&o.scratch.keys), take(&o.scratch.values)
	defer func() { giveBack(&o.scratch.keys, keys) }()
	defer func() { giveBack(&o.scratch.values, vals) }()
	for j := range live(tasks) {
		n := len(keys)
		written := j.st.written()
		j.inlineChanged = min(len(written), bpf.InlineSlots) != min(len(j.slotIDs), bpf.InlineSlots)
		for i, id := range j.slotIDs {
			if i < len(written) && written[i] == id {
				continue
			}
			if !bpf.HasEntry(i + 1) {
				j.inlineChanged = true
				continue
			}
			keys = append(keys, bpf.NewServiceKey(j.fe.Address, uint16(i+1)))
			vals = append(vals, bpf.ServiceValue{BackendID: id, RevNatID: j.st.id})
		}
		if len(keys) > n || j.inlineChanged {
			o.setSlots(j.st, max(int(j.st.slots), len(j.slotIDs)))
		}
		if len(keys) > n {
			j.in |= inSlots
		}
	}
	err := o.maps.Services.BatchUpdate(keys, vals)
	for j := range marked(tasks, inSlots) {
		if err != nil {
			j.st.setWritten(nil) // some may have been written
			j.err = err
		} else {
			j.st.setWritten(j.slotIDs) // made for this update alone
		}
	}
}

// writeMasters writes the master and reverse-NAT entries that changed.
func (o *ops) writeMasters(tasks []task) {
	keys, vals := take(&o.scratch.keys), take(&o.scratch.values)
	defer func() { giveBack(&o.scratch.keys, keys) }()
	defer func() { giveBack(&o.scratch.values, vals) }()
	revIDs, revVals := take(&o.scratch.ids), take(&o.scratch.revNats)
	defer func() { giveBack(&o.scratch.ids, revIDs) }()
	defer func() { giveBack(&o.scratch.revNats, revVals) }()
	for j := range live(tasks) {
		master := j.master()
		j.st.affinity = j.st.affinity || master.AffinityTimeout > 0 // before entries can exist
		if !j.st.masterWritten || j.st.master != master || j.inlineChanged {
			j.st.masterWritten, j.st.master = false, master
			o.setMay(roomServices, &j.st.hasMaster, true)
			keys = append(keys, bpf.NewServiceKey(j.fe.Address, 0))
			v := bpf.ServiceValue{RevNatID: j.st.id, ServiceMaster: master}
			v.SetInline(j.slotIDs)
			vals = append(vals, v)
			j.in |= inMaster
		}
	}
	err := o.maps.Services.BatchUpdate(keys, vals)
	for j := range marked(tasks, inMaster) {
		if err != nil {
			j.err = err
			// The inline slots may hold the old IDs or the new.
			j.st.setWritten(nil)
		} else {
			j.st.masterWritten = true
			j.st.setWritten(j.slotIDs) // made for this update alone
		}
	}
	// The rev-NAT entry follows its master: a frontend whose master
	// failed (live skips it) gets none until its retry.
	for j := range live(tasks) {
		if !j.st.revNatWritten {
			o.setMay(roomRevNat, &j.st.hasRevNat, true)
			revIDs, revVals = append(revIDs, j.st.id), append(revVals, bpf.NewRevNatValue(j.fe.Address))
			j.in |= inRevNat
		}
	}
	err = o.maps.RevNat.BatchUpdate(revIDs, revVals)
	for j := range marked(tasks, inRevNat) {
		if err != nil {
			j.err = firstErr(j.err, err)
		} else {
			j.st.revNatWritten = true
		}
	}
}

// firstErr keeps the first error.
func firstErr(first, next error) error {
	if first != nil {
		return first
	}
	return next
}

// deleteSurplusSlots deletes slots keep(j)+1.. of each frontend: the
// entries of those past the inline ones (the master written before
// holds the others).
func (o *ops) deleteSurplusSlots(tasks []task, keep func(*task) int) {
	keys := take(&o.scratch.keys)
	defer func() { giveBack(&o.scratch.keys, keys) }()
	for j := range live(tasks) {
		if j.st == nil || int(j.st.slots) <= keep(j) {
			continue
		}
		j.keepSlots = keep(j)
		for slot := max(j.keepSlots, bpf.InlineSlots) + 1; slot <= int(j.st.slots); slot++ {
			keys = append(keys, bpf.NewServiceKey(j.fe.Address, uint16(slot)))
		}
		j.in |= inSurplus
	}
	err := o.maps.Services.BatchDelete(keys)
	for j := range marked(tasks, inSurplus) {
		if err != nil {
			j.st.setWritten(nil) // some may be gone
			j.err = err
			continue
		}
		o.setSlots(j.st, j.keepSlots)
		j.st.truncateWritten(j.keepSlots)
	}
}

// deleteMaglev deletes a frontend's Maglev table.
func (o *ops) deleteMaglev(st *frontendState) error {
	st.setMaglevKnown(nil)
	if err := o.maps.Maglev.Delete(st.id); err != nil {
		return err
	}
	o.setMay(roomMaglev, &st.maglev, false)
	return nil
}
