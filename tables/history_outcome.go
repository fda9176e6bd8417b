package tables

import (
	"context"
	"time"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/lbstate/lbstate/lb"
)

// outcomesOnRead attaches, when records are read, the reconciler's
// outcome to the newest entry of each frontend from its row's status
// (tables.Cell does not run FollowOutcomes: a goroutine reading every
// status write of a converging reconciler changed the order in which it
// numbered frontends, in a script test).
func (w *Writer) outcomesOnRead() {
	w.history.status = func(addr lb.L3n4Addr) (reconciler.Status, bool) {
		fe, _, found := w.t.frontends.Get(w.db.ReadTxn(), FrontendByAddress.Query(addr))
		if !found {
			return reconciler.Status{}, false
		}
		return fe.Status, true
	}
}

// FollowOutcomes attaches the reconciler's outcome to entries until ctx
// ends, as statuses are written, where reading them when records are
// read (what the Writer does by itself) would miss an error that a
// retry fixed before anyone read: it watches frontends' status, which
// the reconciler writes back (done, or the error) only for the row it
// read, so a status newer than an entry is that entry's (or, if a later
// change came first, the entry is superseded).
func (h *History) FollowOutcomes(ctx context.Context, db *statedb.DB, frontends statedb.Table[*lb.Frontend]) error {
	// By revision, not with a change iterator: it needs no delete
	// tracker (one changed the order in which the reconciler saw rows),
	// and deletions have no status to read.
	from := frontends.Revision(db.ReadTxn()) + 1
	for {
		rows, watch := frontends.LowerBoundWatch(db.ReadTxn(), statedb.ByRevision[*lb.Frontend](from))
		for fe, rev := range rows {
			from = rev + 1
			if k := fe.Status.Kind; k == reconciler.StatusKindDone || k == reconciler.StatusKindError {
				h.reconciled(fe.Address, fe.Status)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-watch:
		}
		// Rounds at most every outcomeInterval: outcomes are read by
		// people, and waking at every status write of a converging
		// reconciler took its CPU.
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(outcomeInterval):
		}
	}
}

// outcomeInterval spaces FollowOutcomes' rounds.
const outcomeInterval = 100 * time.Millisecond

// reconciled attaches a frontend's status to its newest entry.
func (h *History) reconciled(addr lb.L3n4Addr, st reconciler.Status) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.indexLocked()
	e := h.at(h.last[addr])
	if e == nil || e.new == nil || st.UpdatedAt.Before(e.when) {
		return
	}
	latency := st.UpdatedAt.Sub(e.when)
	switch st.Kind {
	case reconciler.StatusKindDone:
		if e.outcome.State == OutcomeDone {
			return
		}
		o := Outcome{State: OutcomeDone, Latency: latency}
		if e.outcome.State == OutcomeError {
			o.Error = "before: " + e.outcome.Error
		}
		e.outcome = o
	case reconciler.StatusKindError:
		o := Outcome{State: OutcomeError, Error: st.GetError(), Latency: latency}
		if e.outcome == o || e.outcome.State != "" && e.outcome.State != OutcomeError {
			return // the same error again wakes no watcher
		}
		e.outcome = o
	}
	h.notifyLocked()
}

// The states of an Outcome.
const (
	OutcomePending    = "pending"
	OutcomeDone       = "done"
	OutcomeError      = "error"
	OutcomeSuperseded = "superseded"
	OutcomeRemoved    = "removed"
)
