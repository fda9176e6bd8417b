package health

import (
	"errors"
	"os"
	"syscall"

	"github.com/lbstate/lbstate/lb"
)

// Reporter takes what other parts of an agent see of connections to
// backends (an embedder's proxy; the reference datapath reports through
// Passive): each report feeds the backend's breaker like a probe's
// result. A failure counts towards tripping it (and, on probation, trips
// it); a success resets the count and counts towards probation, but does
// not reopen a tripped breaker, since the flows behind it chose the
// backend before it tripped: only a probe does, or for a backend that is
// not probed, its backoff running out (the half-open rule, see
// docs/health.md).
type Reporter interface {
	// ReportConnection records one connection to backend: err nil if it
	// succeeded. Reports about a backend not checked here, or whose
	// service opts out of passive accrual, are ignored. It never blocks
	// on I/O and may be called from any goroutine.
	ReportConnection(backend lb.L3n4Addr, err error)
}

// Errors a datapath reports a failed connection with, which the log
// line gives as last_error and classify as its cause.
var (
	// ErrConnectRefused: the backend answered the SYN with a RST.
	ErrConnectRefused error = syscall.ECONNREFUSED
	// ErrConnectTimeout: no answer to the SYN within the client's
	// retransmission timeout.
	ErrConnectTimeout = errors.New("connect timeout")
)

// Passive is passive failure accrual's way in for a datapath, present
// (non-nil, from health.Cell) only with --health-passive: the reference
// datapath then reports the beginnings of the TCP connections it
// balances. Only TCP backends are judged: a UDP or SCTP "connection"
// has no answer that says the backend refused it. A trip by its reports
// logs their cause (refused, timeout, error) and source besides the
// error.
type Passive struct{ c *checker }

// Report is ReportConnection from source (a short name: "socket", "tc"),
// which the metrics count it by.
func (p *Passive) Report(source string, backend lb.L3n4Addr, err error) {
	if backend.Protocol() != lb.ProtoTCP {
		p.c.metrics.passiveReport(resultIgnored)
		return
	}
	p.c.report(source, backend, err)
}

var _ Reporter = (*checker)(nil)

// sourceReporter is the source of the Reporter interface's reports.
const sourceReporter = "reporter"

// Sources of the reference datapath's reports: its socket and tc
// programs.
const (
	SourceSocket = "socket"
	SourceTC     = "tc"
)

// ReportConnection implements Reporter.
func (c *checker) ReportConnection(backend lb.L3n4Addr, err error) {
	c.report(sourceReporter, backend, err)
}

func (c *checker) report(source string, backend lb.L3n4Addr, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.cur
	var t *target
	if r != nil {
		t = r.targets[backend]
	}
	if t == nil || t.check.noPassive {
		c.metrics.passiveReport(resultIgnored)
		return
	}
	now := c.clock.Now()
	prev := t.breaker
	bc := c.breakerOf(t)
	var tr transition
	if err != nil {
		c.metrics.passiveReport(resultFailure)
		c.metrics.passiveFailure(backend, classify(err))
		t.failedBy, t.lastFailure = source, err
		tr = t.breaker.failure(now, describe(err), &bc)
	} else {
		c.metrics.passiveReport(resultSuccess)
		tr = t.breaker.success(now, false, &bc)
	}
	if tr == tripped {
		c.schedule(r, t, now, false) // on its backoff
	}
	c.observed(r, t, prev, tr, now)
}

// breakerOf is the breaker configuration of t: the node's, with its
// service's threshold if the service sets one.
func (c *checker) breakerOf(t *target) breakerConfig {
	bc := c.cfg.breaker
	if t.check.threshold > 0 {
		bc.threshold = t.check.threshold
	}
	return bc
}

// classify is a failure's cause, as metrics label it and the trip's log
// line says: refused, timeout or error.
func classify(err error) string {
	var timeout timeoutError
	switch {
	case err == nil:
		return ""
	case errors.Is(err, syscall.ECONNREFUSED):
		return causeRefused
	case errors.Is(err, ErrConnectTimeout), errors.As(err, &timeout), errors.Is(err, os.ErrDeadlineExceeded),
		errors.Is(err, syscall.ETIMEDOUT):
		return causeTimeout
	}
	return causeError
}

const (
	causeRefused = "refused"
	causeTimeout = "timeout"
	causeError   = "error"
)

// nopReporter is the Reporter while health checking is off.
type nopReporter struct{}

func (nopReporter) ReportConnection(lb.L3n4Addr, error) {}
