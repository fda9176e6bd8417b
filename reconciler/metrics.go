package reconciler

import (
	"sync/atomic"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbstate/lbstate/metrics"
)

// Metrics are the reconciler's Prometheus collectors, fed by statedb's
// reconciler (it implements statedb/reconciler's Metrics): how long
// reconciliation and pruning take, and how many frontends fail. The
// errors counter counts frontends that start failing, from the
// reconciler's own operations (statedb counts every failed retry).
type Metrics struct {
	duration      *prometheus.HistogramVec
	failing       prometheus.Gauge
	errors        prometheus.Counter
	pruneDuration prometheus.Histogram
	pruneErrors   prometheus.Counter
	prunes        atomic.Uint64
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
			"Frontends whose reconciliation started failing (retries that fail again are not counted)")))),
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

// ReconciliationErrors sets the failing frontends; new, which counts
// every retry that failed again, is left out: the errors counter counts
// transitions (frontendFailed).
func (m *Metrics) ReconciliationErrors(_ cell.FullModuleID, _ string, new, current int) {
	m.failing.Set(float64(current))
}

// frontendFailed counts a frontend whose reconciliation started failing.
func (m *Metrics) frontendFailed() { m.errors.Inc() }

func (m *Metrics) PruneError(_ cell.FullModuleID, _ string, err error) {
	if err != nil { // statedb reports every prune, failed or not
		m.pruneErrors.Inc()
	}
}

func (m *Metrics) PruneDuration(_ cell.FullModuleID, _ string, d time.Duration) {
	m.pruneDuration.Observe(d.Seconds())
	m.prunes.Add(1)
}

// Prunes returns how many prunes have run, failed or not: a tool that
// times a restart waits for the first (lbbench -restart), without
// gathering the registry.
func (m *Metrics) Prunes() uint64 { return m.prunes.Load() }

// mapMetrics exports the room in the maps the reconciler fills (room.go),
// by map: entries in use, capacity, their ratio (as Cilium's
// bpf_map_pressure), and the frontends that found no room. It reads the
// reconciler's counts when scraped, so that writing costs nothing more.
type mapMetrics struct {
	o                                 *ops
	entries, capacity, pressure, full *prometheus.Desc
	waiting, writes                   *prometheus.Desc
}

func newMapMetrics(o *ops) *mapMetrics {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(metrics.Namespace, "map", name), help, []string{"map"}, nil)
	}
	return &mapMetrics{
		o: o,
		entries: desc("entries",
			"Entries the reconciler has in the map (after a failed write, at most this many until it counts them again)"),
		capacity: desc("capacity", "Most entries the map holds (max_entries, set by its --lb-*-max flag)"),
		pressure: desc("pressure", "Entries in the map over its capacity, from 0 to 1"),
		full: desc("full_total",
			"Frontends that started waiting for room in the map (refused, or failed, for want of it; their retries are not counted)"),
		writes: desc("writes_total",
			"Entries the reconciler updated or deleted in the map (a Maglev table counts one); a restart over unchanged declarations writes none"),
		waiting: prometheus.NewDesc(prometheus.BuildFQName(metrics.Namespace, "reconciler", "waiting_frontends"),
			"Frontends waiting for room in a full map (or for a frontend ID: lb_rev_nat full), retried as room frees", nil, nil),
	}
}

func (m *mapMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.entries
	ch <- m.capacity
	ch <- m.pressure
	ch <- m.full
	ch <- m.waiting
	ch <- m.writes
}

func (m *mapMetrics) Collect(ch chan<- prometheus.Metric) {
	select {
	case <-m.o.restored:
	default:
		return // nothing counted yet
	}
	m.o.mu.Lock()
	rooms := m.o.room.maps
	waiting := len(m.o.waiting) + len(m.o.idWaiting)
	m.o.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(m.waiting, prometheus.GaugeValue, float64(waiting))
	for _, r := range rooms {
		ch <- prometheus.MustNewConstMetric(m.entries, prometheus.GaugeValue, float64(r.used), r.name)
		ch <- prometheus.MustNewConstMetric(m.capacity, prometheus.GaugeValue, float64(r.capacity), r.name)
		ch <- prometheus.MustNewConstMetric(m.pressure, prometheus.GaugeValue, float64(r.used)/float64(r.capacity), r.name)
		ch <- prometheus.MustNewConstMetric(m.full, prometheus.CounterValue, float64(r.full), r.name)
	}
	for name, n := range m.o.writes.all() {
		ch <- prometheus.MustNewConstMetric(m.writes, prometheus.CounterValue, float64(n), name)
	}
}

// registerMapMetrics registers the map metrics in the hive's registry, if
// it has one (metrics.Cell).
func registerMapMetrics(p struct {
	cell.In
	Registerer prometheus.Registerer `optional:"true"`
	Ops        *ops
}) {
	metrics.Register(p.Registerer, newMapMetrics(p.Ops))
}
