package tables

import (
	"context"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
)

// Memory after deletions. StateDB keeps, for each index of a table, the
// last write transaction made on it, to reuse its allocation, and that
// transaction keeps the index's tree as it was before it. After a
// delete-all the last transaction on a table's graveyard (the deleted
// rows its change iterators have yet to see) is StateDB's collection of
// it, which runs at most once a second: up to a second's worth of
// deleted rows stay reachable until the next deletion (5 to 20 MB after
// 100,000 services x 10 backends went). A write transaction that touches
// every index and is aborted takes those transactions out of the trees
// and drops them, without a change anyone could see.

// ReleaseDeleted drops what StateDB keeps of the services, frontends and
// backends tables as they were before their last write transaction, the
// rows deleted then included. It changes nothing: it writes a row into
// each and deletes it, in a transaction it aborts. The tables' Cell
// runs it after deletions (releaseSchedule); call it to measure the
// memory of the rows left once StateDB collected its graveyards. Call it
// outside any write transaction on the tables: it takes their locks.
func (w *Writer) ReleaseDeleted() {
	releaseDeleted(w.db, w.t)
}

func releaseDeleted(db *statedb.DB, t *tableSet) {
	// A handle of its own names these transactions in the metrics.
	txn := db.NewHandle("lb-tables-release").WriteTxn(t.services, t.frontends, t.backends)
	defer txn.Abort()
	// Zero values: no row of the Writer's has their keys, and what the
	// insert replaces, if anything, the abort puts back.
	svc, fe, be := &lb.Service{}, &lb.Frontend{}, &lb.Backend{}
	t.services.Insert(txn, svc)
	t.services.Delete(txn, svc)
	t.frontends.Insert(txn, fe)
	t.frontends.Delete(txn, fe)
	t.backends.Insert(txn, be)
	t.backends.Delete(txn, be)
}

// releaseSchedule says when the tables' Cell releases (ReleaseDeleted):
// first after a change, then first, 2 x first, ... up to last after each
// release, and no more until the next change. A change during the schedule
// starts it over without putting off the release under way, so a table
// that changes all the time is released every first. The graveyard is
// collected once every change iterator (the reconciler, a health
// checker) has seen the deletions; the doubling waits for one that lags.
type releaseSchedule struct {
	first, last time.Duration
	// released, if set, is called after each release (tests), with
	// whether another is planned.
	released func(planned bool)
}

var defaultReleaseSchedule = releaseSchedule{first: 2 * time.Second, last: 32 * time.Second}

func (s releaseSchedule) run(ctx context.Context, db *statedb.DB, t *tableSet) {
	// The start counts as a change (what was there before is released
	// too); the watches are taken anew only when they fire, so no change
	// goes unseen.
	timer := time.NewTimer(s.first)
	defer timer.Stop()
	step := s.first // 0: no release planned
	var svcs, fes, bes <-chan struct{}
	watch := func() {
		txn := db.ReadTxn()
		_, svcs = t.services.AllWatch(txn)
		_, fes = t.frontends.AllWatch(txn)
		_, bes = t.backends.AllWatch(txn)
	}
	watch()
	for {
		select {
		case <-ctx.Done():
			return
		case <-svcs:
		case <-fes:
		case <-bes:
		case <-timer.C:
			releaseDeleted(db, t)
			if step > s.last {
				step = 0
			} else {
				timer.Reset(step)
				step *= 2
			}
			if s.released != nil {
				s.released(step != 0)
			}
			continue
		}
		watch()
		if step == 0 {
			timer.Reset(s.first)
		}
		step = s.first
	}
}

// startReleasing runs the release schedule while the hive runs.
func startReleasing(lc cell.Lifecycle, db *statedb.DB, t *tableSet) {
	startReleaseSchedule(lc, db, t, defaultReleaseSchedule)
}

func startReleaseSchedule(lc cell.Lifecycle, db *statedb.DB, t *tableSet, s releaseSchedule) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	lc.Append(cell.Hook{
		OnStart: func(cell.HookContext) error {
			go func() {
				defer close(done)
				s.run(ctx, db, t)
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
