package tables

import (
	"context"
	"time"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/lbstate/lbstate/lb"
)

// readCurrentRows lets the journal read frontends' rows when records are
// read: the row after each frontend's newest change, and its status,
// the reconciler's outcome of that change (tables.Cell does not run
// FollowOutcomes: a goroutine reading every status write of a
// converging reconciler changed the order in which it numbered
// frontends, in a script test).
func (w *Writer) readCurrentRows() {
	w.history.rows = func() func(lb.L3n4Addr) (*lb.Frontend, bool) {
		txn := w.db.ReadTxn()
		return func(addr lb.L3n4Addr) (*lb.Frontend, bool) {
			fe, _, found := w.t.frontends.Get(txn, FrontendByAddress.Query(addr))
			return fe, found
		}
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
	h.reconciledLocked(addr, st)
}

func (h *History) reconciledLocked(addr lb.L3n4Addr, st reconciler.Status) {
	e := h.at(h.last[addr])
	if e == nil || e.deleted {
		return
	}
	latency := st.UpdatedAt.Sub(h.start) - e.when
	if latency < 0 {
		return // a status older than the change
	}
	switch st.Kind {
	case reconciler.StatusKindDone:
		if e.state == stateDone {
			return
		}
		if e.state == stateError && e.err != nil {
			before := "before: " + *e.err
			e.err = &before
		}
		e.state, e.latency = stateDone, latency
	case reconciler.StatusKindError:
		msg := st.GetError()
		if e.state == stateError && e.err != nil && *e.err == msg && e.latency == latency || e.state != statePending && e.state != stateError {
			return // the same error again wakes no watcher
		}
		e.state, e.err, e.latency = stateError, &msg, latency
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
