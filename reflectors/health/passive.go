package health

import "github.com/lbstate/lbstate/lb"

// Reporter takes what other parts of an agent see of connections to
// backends (the reference datapath's per-backend counters, an embedder's
// proxy): each report feeds the backend's breaker like a probe's result.
// A failure counts towards tripping it (and, on probation, trips it); a
// success resets the count and counts towards probation, but does not
// reopen a tripped breaker, since the flows behind it chose the backend
// before it tripped: only a probe does, or for a backend that is not
// probed (UDP without an annotation), its backoff running out.
type Reporter interface {
	// ReportConnection records one connection to backend: err nil if it
	// succeeded. Reports about a backend not checked here are ignored.
	// It never blocks on I/O and may be called from any goroutine.
	ReportConnection(backend lb.L3n4Addr, err error)
}

var _ Reporter = (*checker)(nil)

// ReportConnection implements Reporter.
func (c *checker) ReportConnection(backend lb.L3n4Addr, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.cur
	var t *target
	if r != nil {
		t = r.targets[backend]
	}
	if t == nil {
		c.metrics.passiveIgnored.Inc()
		return
	}
	now := c.clock.Now()
	prev := t.breaker
	var tr transition
	if err != nil {
		c.metrics.passiveFailure.Inc()
		tr = t.breaker.failure(now, describe(err), &c.cfg.breaker)
	} else {
		c.metrics.passiveSuccess.Inc()
		tr = t.breaker.success(now, false, &c.cfg.breaker)
	}
	if tr == tripped {
		c.schedule(r, t, now, false) // on its backoff
	}
	c.observed(r, t, prev, tr, now)
}

// nopReporter is the Reporter while health checking is off.
type nopReporter struct{}

func (nopReporter) ReportConnection(lb.L3n4Addr, error) {}
