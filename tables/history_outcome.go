package tables

import (
	"context"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/lbstate/lbstate/lb"
)

// registerHistoryOutcomes runs FollowOutcomes while the hive runs (on
// its lifecycle: tables.Cell needs no job registry).
func registerHistoryOutcomes(lc cell.Lifecycle, db *statedb.DB, w *Writer) {
	if !w.history.Enabled() {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	lc.Append(cell.Hook{
		OnStart: func(cell.HookContext) error {
			go func() {
				defer close(done)
				if err := w.history.FollowOutcomes(ctx, db, w.t.frontends); err != nil {
					w.log.Error("History: not following the reconciler's outcomes", "error", err)
				}
			}()
			return nil
		},
		OnStop: func(cell.HookContext) error {
			cancel()
			<-done
			return nil
		},
	})
}

// FollowOutcomes attaches the reconciler's outcome to entries until ctx
// ends: it watches frontends' status, which the reconciler writes back
// (done, or the error) only for the row it read, so a status newer than
// an entry is that entry's (or, if a later change came first, the entry
// is superseded). Embedders who build the tables with New run it
// themselves; tables.Cell does.
func (h *History) FollowOutcomes(ctx context.Context, db *statedb.DB, frontends statedb.Table[*lb.Frontend]) error {
	wtxn := db.WriteTxn(frontends)
	changes, err := frontends.Changes(wtxn)
	wtxn.Commit()
	if err != nil {
		return err
	}
	for {
		seq, watch := changes.Next(db.ReadTxn())
		for c := range seq {
			if c.Deleted {
				continue
			}
			if k := c.Object.Status.Kind; k == reconciler.StatusKindDone || k == reconciler.StatusKindError {
				h.reconciled(c.Object.Address, c.Object.Status)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-watch:
		}
	}
}

// reconciled attaches a frontend's status to its newest entry.
func (h *History) reconciled(addr lb.L3n4Addr, st reconciler.Status) {
	h.mu.Lock()
	defer h.mu.Unlock()
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
		if e.outcome.State == "" || e.outcome.State == OutcomeError {
			e.outcome = Outcome{State: OutcomeError, Error: st.GetError(), Latency: latency}
		}
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
