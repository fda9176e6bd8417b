package reconciler

import (
	"time"

	"github.com/cilium/hive/cell"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbstate/lbstate/metrics"
)

// Metrics are the reconciler's Prometheus collectors, fed by statedb's
// reconciler (it implements statedb/reconciler's Metrics): how long
// reconciliation and pruning take, and how many frontends fail.
type Metrics struct {
	duration      *prometheus.HistogramVec
	failing       prometheus.Gauge
	errors        prometheus.Counter
	pruneDuration prometheus.Histogram
	pruneErrors   prometheus.Counter
}

// NewMetrics returns the reconciler's metrics, registered in reg (see
// metrics.Register; nil registers nothing).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	buckets := prometheus.ExponentialBuckets(1e-6, 4, 12) // 1µs to ~4s
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: metrics.Namespace, Subsystem: "reconciler", Name: name, Help: help}
	}
	return &Metrics{
		duration: metrics.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metrics.Namespace, Subsystem: "reconciler", Name: "duration_seconds",
			Help:    "Time spent writing frontends into the maps, by operation (update, delete).",
			Buckets: buckets,
		}, []string{"operation"})),
		failing: metrics.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts(opts("failing_frontends",
			"Frontends whose last reconciliation failed (they are retried with backoff)")))),
		errors: metrics.Register(reg, prometheus.NewCounter(prometheus.CounterOpts(opts("errors_total",
			"Failed reconciliations of a frontend")))),
		pruneDuration: metrics.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metrics.Namespace, Subsystem: "reconciler", Name: "prune_duration_seconds",
			Help: "Time spent removing map entries no frontend accounts for.", Buckets: buckets,
		})),
		pruneErrors: metrics.Register(reg, prometheus.NewCounter(prometheus.CounterOpts(opts("prune_errors_total",
			"Failed prunes")))),
	}
}

func (m *Metrics) ReconciliationDuration(_ cell.FullModuleID, _, op string, d time.Duration) {
	m.duration.WithLabelValues(op).Observe(d.Seconds())
}

func (m *Metrics) ReconciliationErrors(_ cell.FullModuleID, _ string, new, current int) {
	m.errors.Add(float64(new))
	m.failing.Set(float64(current))
}

func (m *Metrics) PruneError(_ cell.FullModuleID, _ string, err error) {
	if err != nil { // statedb reports every prune, failed or not
		m.pruneErrors.Inc()
	}
}

func (m *Metrics) PruneDuration(_ cell.FullModuleID, _ string, d time.Duration) {
	m.pruneDuration.Observe(d.Seconds())
}
