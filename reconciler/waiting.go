package reconciler

// Who gets the room when not every frontend fits. A frontend in the maps
// keeps its entries. The room that is free goes to the frontends that
// need it in the order of their IDs, lowest first: IDs are handed out in
// the order the reconciler first sees frontends, and kept across
// restarts, so the oldest frontends come first. A frontend that does not
// fit in what is left writes nothing, fails with an error wrapping
// bpf.ErrMapFull, and waits; a newer one that fits is written.
//
// When room frees, it is offered to the waiting frontends, oldest first:
// each that now fits has its room reserved, so that no newer frontend
// takes it, and statedb's reconciler is asked to retry it at once (kick)
// rather than after its backoff.

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// waiter is a frontend waiting for room.
type waiter struct {
	t        task    // as last tried, to work out its need again
	reserved entries // room held for it
	kicked   bool    // its retry was asked for since it last failed
	// refusedBy says that the kernel, not the counts, found no room for
	// it, when the maps had freeAfter left once it took back what it
	// wrote. The counts said it fits, so they cannot say when it does:
	// it is offered room only once some map has more free than then.
	refusedBy bool
	freeAfter entries
}

// admit refuses the tasks that do not fit in the room that is free.
func (o *ops) admit(tasks []task) {
	free := o.room.free()
	free.sub(o.room.reserved)
	if len(o.waiting) > 0 {
		for j := range live(tasks) {
			if w := o.waiting[j.fe.Address]; w != nil {
				free.add(w.reserved) // held for this very frontend
			}
		}
	}
	// The usual case: everything fits, even counting every backend as
	// new, which spares a lookup of each.
	var most entries
	for j := range live(tasks) {
		most.add(needOwn(j))
		most[roomBackends] += len(j.fe.Backends) + len(j.fe.Hidden())
	}
	if _, ok := most.fitsIn(free); ok {
		return
	}
	var total entries
	for j := range live(tasks) {
		total.add(o.need(j, nil))
	}
	if _, ok := total.fitsIn(free); ok {
		return
	}
	// Some would be refused: not on the word of counts that a failure
	// left high, nor of old ones (someone else may have deleted entries).
	if o.room.stale || o.room.recountDue(time.Now()) {
		if err := o.room.recount(); err != nil {
			o.log.Warn("Cannot count the entries of the maps", "error", err)
		}
	}
	o.admitOldestFirst(tasks)
}

// admitOldestFirst goes through the tasks and the waiting frontends that
// have room reserved, in order of ID, giving each task the room it needs
// if it is left.
func (o *ops) admitOldestFirst(tasks []task) {
	type turn struct {
		id uint32
		j  *task   // a task of this batch, or
		w  *waiter // a waiting frontend with room reserved
	}
	var order []turn
	inBatch := make(map[lb.L3n4Addr]bool, len(tasks))
	for j := range live(tasks) {
		order = append(order, turn{id: j.st.id, j: j})
		inBatch[j.fe.Address] = true
	}
	for _, w := range o.waitOrder {
		if w.reserved != (entries{}) && !inBatch[w.t.fe.Address] {
			order = append(order, turn{id: w.t.st.id, w: w})
		}
	}
	slices.SortFunc(order, func(a, b turn) int { return cmp.Compare(a.id, b.id) })
	free := o.room.free()
	counted := map[lb.L3n4Addr]bool{} // backends an earlier task brings
	for _, t := range order {
		if t.w != nil {
			free.sub(t.w.reserved)
			continue
		}
		n := o.need(t.j, counted)
		if m, ok := n.fitsIn(free); !ok {
			t.j.err, t.j.refused, t.j.fullIn = o.noRoom(t.j, m, n[m], free[m]), true, m
			continue
		}
		free.sub(n)
		for _, b := range kept(t.j.fe) {
			counted[b.Address] = true
		}
	}
}

// settle ends an update: it records which frontends wait for room, has
// those that the kernel found no room for, and that were not in service,
// take back what they wrote, and offers the room that freed.
func (o *ops) settle(tasks []task) {
	var (
		undo       []task
		kernelFull bool
	)
	var byKernel []*waiter
	for i := range tasks {
		j := &tasks[i]
		if j.st == nil {
			if errors.Is(j.err, bpf.ErrMapFull) && o.startIDWaiting(j.fe.Address) { // no ID
				o.noteFull(j)
			}
			continue
		}
		waited := o.waiting[j.fe.Address] != nil || o.idWaiting[j.fe.Address] != nil
		o.stopIDWaiting(j.fe.Address) // it has an ID
		switch {
		case j.err == nil:
			o.stopWaiting(j.fe.Address, true)
		case errors.Is(j.err, bpf.ErrMapFull):
			if !waited { // a transition, not a retry
				o.noteFull(j)
			}
			w := o.startWaiting(j)
			if !j.refused {
				kernelFull = true
				byKernel = append(byKernel, w)
				if !j.wasServed {
					undo = append(undo, task{fe: j.fe})
				}
			}
		default:
			o.room.stale = true
			o.stopWaiting(j.fe.Address, false)
		}
	}
	if len(undo) > 0 {
		o.remove(undo, false)
	}
	if kernelFull {
		// The counts were low: someone else wrote into the maps.
		if err := o.room.recount(); err != nil {
			o.log.Warn("Cannot count the entries of the maps", "error", err)
		}
		// What they took back is no new room for them: without this, each
		// would be retried at once, fail again, and so on.
		free := o.room.free()
		for _, w := range byKernel {
			w.refusedBy, w.freeAfter = true, free
		}
	}
	o.offerRoom()
}

// startWaiting records a frontend that found no room, and returns its
// waiter.
func (o *ops) startWaiting(j *task) *waiter {
	w := o.waiting[j.fe.Address]
	if w == nil {
		w = &waiter{}
		o.waiting[j.fe.Address] = w
		i, _ := slices.BinarySearchFunc(o.waitOrder, j.st.id, byID)
		o.waitOrder = slices.Insert(o.waitOrder, i, w)
	}
	o.release(w, false)
	w.t, w.kicked, w.refusedBy = *j, false, false
	w.t.err = nil
	return w
}

// stopWaiting forgets a waiting frontend; used says that it took the room
// held for it.
func (o *ops) stopWaiting(addr lb.L3n4Addr, used bool) {
	o.stopIDWaiting(addr)
	if w, ok := o.waiting[addr]; ok {
		o.release(w, used)
		delete(o.waiting, addr)
		if i, found := slices.BinarySearchFunc(o.waitOrder, w.t.st.id, byID); found {
			o.waitOrder = slices.Delete(o.waitOrder, i, i+1)
		}
	}
}

func byID(w *waiter, id uint32) int { return cmp.Compare(w.t.st.id, id) }

// release lets go of the room held for w. Room that w did not use is
// offered again, as freed room is.
func (o *ops) release(w *waiter, used bool) {
	if w.reserved == (entries{}) {
		return
	}
	o.room.reserved.sub(w.reserved)
	w.reserved = entries{}
	if !used {
		o.room.freed = true
	}
}

// offerRoom, when entries were deleted since it last ran, reserves room
// for the waiting frontends that fit, oldest first, and has them retried.
func (o *ops) offerRoom() {
	if !o.room.freed {
		return
	}
	o.room.freed = false
	o.offerIDs()
	if len(o.waiting) == 0 {
		return
	}
	free := o.room.free()
	counted := map[lb.L3n4Addr]bool{}
	o.room.reserved = entries{}
	var kick []lb.L3n4Addr
	for _, w := range o.waitOrder {
		w.reserved = entries{}
		if w.refusedBy && !more(o.room.free(), w.freeAfter) {
			continue // no room freed since the kernel refused it
		}
		if _, ok := needOwn(&w.t).fitsIn(free); !ok {
			continue // the usual case once the room is taken: no lookups
		}
		n := o.need(&w.t, counted)
		if _, ok := n.fitsIn(free); !ok {
			continue
		}
		free.sub(n)
		for _, b := range kept(w.t.fe) {
			counted[b.Address] = true
		}
		w.reserved = n
		o.room.reserved.add(n)
		if !w.kicked {
			w.kicked = true
			kick = append(kick, w.t.fe.Address)
		}
	}
	if len(kick) > 0 && o.kick != nil {
		o.kick(kick)
	}
}

// more reports whether a has more entries than b in some map.
func more(a, b entries) bool {
	for m := range a {
		if a[m] > b[m] {
			return true
		}
	}
	return false
}

// noteFull counts a frontend that starts waiting for room, and logs it,
// once per mapFullLogInterval and map. Its retries while it waits are not
// counted again.
func (o *ops) noteFull(j *task) {
	m := roomServices
	var full *bpf.MapFullError
	if errors.As(j.err, &full) {
		for i := range o.room.maps {
			if o.room.maps[i].name == full.Map {
				m = roomMap(i)
			}
		}
	} else {
		m = j.fullIn
	}
	r := &o.room.maps[m]
	r.full++
	if now := time.Now(); now.Sub(r.lastLog) >= mapFullLogInterval {
		o.log.Warn("Map full: frontends wait for room, oldest first",
			"map", r.name, "entries", r.used, "capacity", r.capacity, "raise", r.flag,
			"frontend", j.fe.Address, "waiting", len(o.waiting)+len(o.idWaiting)+1, "refused-since-last-log", r.unlogged, "error", j.err)
		r.lastLog, r.unlogged = now, 0
	} else {
		r.unlogged++
	}
}

// kicker has statedb's reconciler retry frontends now: it marks those
// that failed pending, which makes them changes to reconcile.
type kicker struct {
	mu     sync.Mutex
	addrs  []lb.L3n4Addr
	signal chan struct{}
}

func newKicker() *kicker { return &kicker{signal: make(chan struct{}, 1)} }

// add asks for a retry of addrs; it does not block.
func (k *kicker) add(addrs []lb.L3n4Addr) {
	k.mu.Lock()
	k.addrs = append(k.addrs, addrs...)
	k.mu.Unlock()
	select {
	case k.signal <- struct{}{}:
	default:
	}
}

// run marks the frontends it is asked about pending, until ctx ends.
func (k *kicker) run(ctx context.Context, db *statedb.DB, table statedb.RWTable[*lb.Frontend], r reconciler.Reconciler[*lb.Frontend]) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-k.signal:
		}
		k.mu.Lock()
		addrs := k.addrs
		k.addrs = nil
		k.mu.Unlock()
		// A frontend's failure is written back when the round that found
		// it ends; wait for that, so as to find it failed.
		if _, _, err := r.WaitUntilReconciled(ctx, table.Revision(db.ReadTxn())); err != nil {
			return nil
		}
		wtxn := db.WriteTxn(table)
		for _, addr := range addrs {
			fe, _, ok := table.Get(wtxn, tables.FrontendByAddress.Query(addr))
			if ok && fe.Status.Kind == reconciler.StatusKindError {
				table.Insert(wtxn, fe.Clone().SetStatus(reconciler.StatusPending()))
			}
		}
		wtxn.Commit()
	}
}
