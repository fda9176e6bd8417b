package datapath

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/metrics"
	"github.com/lbstate/lbstate/reflectors/health"
)

// connReports hands the reference datapath's connection reports
// (bpf.ConnReader) to passive failure accrual (health.Passive), with
// --health-passive: each becomes a ReportConnection of the backend's
// breaker, the datapath's result as its error.
type connReports struct {
	passive *health.Passive
	log     *slog.Logger
	// interval is the longest a success waits to be read: successes
	// wake no reader (c/conn.h), failures do.
	interval time.Duration

	reports *prometheus.CounterVec // source, result
	lost    prometheus.Counter
	seen    uint64 // lost reports counted so far
}

func newConnReports(passive *health.Passive, log *slog.Logger, reg prometheus.Registerer) *connReports {
	return &connReports{
		passive: passive, log: log, interval: 100 * time.Millisecond,
		reports: metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace,
			Name: "datapath_connection_reports_total",
			Help: "Connection outcomes the reference datapath reported for passive failure accrual, by source (socket, tc) and result (ok, refused, timeout, error)"},
			[]string{"source", "result"})),
		lost: metrics.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Namespace: metrics.Namespace,
			Name: "datapath_connection_reports_lost_total",
			Help: "Connection reports the reference datapath dropped because the agent had not read the ring buffer in time"})),
	}
}

// errOf is the error a report's result stands for.
func errOf(r bpf.ConnResult) error {
	switch r {
	case bpf.ConnOK:
		return nil
	case bpf.ConnRefused:
		return health.ErrConnectRefused
	case bpf.ConnTimeout:
		return health.ErrConnectTimeout
	}
	return errConnectFailed
}

var errConnectFailed = errors.New("connect failed (an ICMP error)")

// run reads reports until ctx ends.
func (c *connReports) run(ctx context.Context, r *bpf.ConnReader) {
	go func() {
		<-ctx.Done()
		r.Close() // ends the Read under way
	}()
	var events []bpf.ConnEvent
	for {
		var err error
		events, err = r.Read(events[:0], time.Now().Add(c.interval))
		for _, e := range events {
			c.reports.WithLabelValues(e.Source.String(), e.Result.String()).Inc()
			c.passive.Report(e.Source.String(), e.Backend, errOf(e.Result))
		}
		if errors.Is(err, bpf.ErrReaderClosed) {
			return
		}
		if err != nil {
			c.log.Warn("Reading the datapath's connection reports", "error", err)
		}
		if n, err := r.Lost(); err == nil && n > c.seen {
			c.lost.Add(float64(n - c.seen))
			c.seen = n
		}
	}
}
