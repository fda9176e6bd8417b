package tables

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"
)

// waitRecord polls the history until ok holds for the newest record of
// histFE, or fails at the deadline.
func waitRecord(t *testing.T, h *History, ok func(HistoryRecord) bool) HistoryRecord {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		recs, watch := h.Records(HistoryQuery{Frontend: histFE})
		if len(recs) > 0 && ok(recs[len(recs)-1]) {
			return recs[len(recs)-1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no matching record by the deadline: %+v", recs)
		}
		select {
		case <-watch:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func TestHistoryAttachesTheReconcilersOutcome(t *testing.T) {
	w := newTestWriter(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.History().FollowOutcomes(ctx, w.db, w.t.frontends) }()
	defer func() { cancel(); <-done }()

	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		histService(t, w, txn, histB1)
		return nil
	})
	// What the reconciler does: a failure, then success.
	setStatus := func(st reconciler.Status) {
		txn := w.db.WriteTxn(w.t.frontends)
		fe, _, _ := w.t.frontends.Get(txn, FrontendByAddress.Query(histFE))
		w.t.frontends.Insert(txn, fe.Clone().SetStatus(st))
		txn.Commit()
	}
	setStatus(reconciler.StatusError(errors.New("map full")))
	r := waitRecord(t, w.History(), func(r HistoryRecord) bool { return r.Outcome.State == OutcomeError })
	if r.Outcome.Error != "map full" {
		t.Fatalf("outcome: %+v", r.Outcome)
	}
	setStatus(reconciler.StatusDone())
	r = waitRecord(t, w.History(), func(r HistoryRecord) bool { return r.Outcome.State == OutcomeDone })
	if r.Outcome.Latency <= 0 || r.Outcome.Error != "before: map full" {
		t.Fatalf("outcome: %+v", r.Outcome)
	}

	// A change the reconciler never wrote alone is superseded by the next.
	mustWrite(t, w, func(txn statedb.WriteTxn) error { histService(t, w, txn, histB1, histB2); return nil })
	mustWrite(t, w, func(txn statedb.WriteTxn) error { histService(t, w, txn, histB2); return nil })
	recs, _ := w.History().Records(HistoryQuery{Frontend: histFE})
	if len(recs) != 3 || recs[1].Outcome.State != OutcomeSuperseded || recs[2].Outcome.State != OutcomePending {
		t.Fatalf("records: %+v", recs)
	}
}
