package health

import (
	"errors"
	"fmt"
	"time"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// observed logs and counts a breaker's transition and hands its verdict
// to the writer if it changed. prev is the breaker before the
// observation.
func (c *checker) observed(r *runState, t *target, prev breaker, tr transition, now time.Time) {
	b := &t.breaker
	switch tr {
	case noTransition:
	case tripped:
		failures := prev.count + 1 // from closed: the threshold
		if prev.state == probation {
			failures = 1
		}
		attrs := []any{"failures", failures, "last_error", b.lastErr}
		if t.failedBy == SourceSocket || t.failedBy == SourceTC {
			attrs = append(attrs, "cause", classify(t.lastFailure), "seen_by", t.failedBy)
		}
		t.log.Info("Consecutive failure-accrual breaker tripped", append(attrs,
			"probation", prev.state == probation, "next_probe_in", (t.due-r.offset(now)).Round(time.Millisecond))...)
	case reopened:
		t.log.Info("Consecutive failure-accrual breaker reopened",
			"down_for", now.Sub(prev.since).Round(time.Millisecond), "probation_successes", c.breakerOf(t).threshold)
	case recovered:
		t.log.Info("Consecutive failure-accrual breaker closed: probation passed",
			"successes", c.breakerOf(t).threshold)
	}
	if tr != noTransition {
		c.metrics.transitions.WithLabelValues(tr.String()).Inc()
		t.state.Set(float64(b.state))
	}
	if v := (lb.HealthVerdict{Healthy: b.healthy(), Since: b.since, LastError: b.lastErr}); !v.Equal(t.verdict) {
		t.verdict = v
		c.queueVerdict(r, t.addr, v, verdictCause(tr, t.failedBy, b.lastErr))
	}
}

// queuedVerdict is a verdict to write, and why (the history's cause).
type queuedVerdict struct {
	v   lb.HealthVerdict
	why string
}

func (c *checker) queueVerdict(r *runState, addr lb.L3n4Addr, v lb.HealthVerdict, why string) {
	c.pending[addr] = queuedVerdict{v, why}
	signal(r.write)
}

// verdictCause says why a breaker's verdict changed, for the history:
// "breaker tripped", "reopened", "recovered", with what failed and who
// saw it (a probe, or the datapath's connections: passive).
func verdictCause(tr transition, failedBy, lastErr string) string {
	why := tr.String()
	switch tr {
	case tripped:
		why = "breaker tripped"
	case reopened:
		why = "breaker reopened"
	case noTransition:
		why = "verdict"
	}
	if tr != recovered && lastErr != "" {
		why += ": " + lastErr
	}
	if failedBy == SourceSocket || failedBy == SourceTC {
		why += " (passive, seen by " + failedBy + ")"
	}
	return why
}

// backendChanged puts a checked backend's verdict back on its row when
// the row says otherwise: the row was deleted and added again (which
// resets its health), or a previous run left it.
func (c *checker) backendChanged(r *runState, row *lb.Backend) {
	t := r.targets[row.Address]
	if t == nil {
		return
	}
	if _, queued := c.pending[row.Address]; queued {
		return
	}
	if !row.Verdict().Equal(t.verdict) {
		c.queueVerdict(r, row.Address, t.verdict, "verdict restored on a new row")
	}
}

// writeVerdicts writes the pending verdicts, all that piled up since the
// last write in one transaction, until the run ends or a write fails
// other than by invalid input: it returns that error, nothing of the
// transaction committed.
func (c *checker) writeVerdicts(r *runState, w *tables.Writer) error {
	for {
		select {
		case <-r.ctx.Done():
			return nil
		case <-r.write:
		}
		c.mu.Lock()
		batch := c.pending
		c.pending = make(map[lb.L3n4Addr]queuedVerdict, len(batch))
		c.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		txn := w.WriteTxn()
		err := w.Batch(txn, func() error {
			for addr, q := range batch {
				if _, _, found := w.Backends().Get(txn, tables.BackendByAddress.Query(addr)); !found {
					continue // gone since: nothing to say about it
				}
				w.SetCause(txn, &tables.Cause{Source: "health", Name: addr.String(), Detail: q.why})
				if err := w.SetBackendVerdict(txn, addr, q.v); errors.Is(err, tables.ErrInvalid) {
					r.src.Reject(err)
				} else if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			txn.Abort()
			return fmt.Errorf("writing %d health verdicts (aborted): %w", len(batch), err)
		}
		txn.Commit()
	}
}
