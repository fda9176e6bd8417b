package health

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/metrics"
)

// metricSet is health checking's collectors. The per-backend state gauge
// loses a backend's series when the backend is no longer checked.
type metricSet struct {
	probes      *prometheus.CounterVec // kind, result
	state       *prometheus.GaugeVec   // backend
	transitions *prometheus.CounterVec // transition
	passive     *prometheus.CounterVec // result
	failures    *prometheus.CounterVec // backend, cause
	delay       prometheus.Histogram
	duration    [len(probeKindNames)]prometheus.Observer // by kind
	backends    *prometheus.GaugeVec                     // kind
	durations   *prometheus.HistogramVec                 // kind; looked up once into duration

	// byResult and the passive counters are looked up once: a probe's
	// or a report's count is one increment, not a label lookup.
	byResult [len(probeKindNames)][len(probeResults)]prometheus.Counter
	passiveN [len(passiveResults)]prometheus.Counter
}

var passiveResults = [...]string{resultSuccess, resultFailure, resultIgnored}

// passiveReport counts a passive report, whatever its source (the
// Reporter interface, or the datapath through Passive, which also
// counts its own by source).
func (m *metricSet) passiveReport(result string) {
	for i, r := range passiveResults {
		if r == result {
			m.passiveN[i].Inc()
		}
	}
}

// passiveFailure counts a passive failure of backend by its cause.
func (m *metricSet) passiveFailure(backend lb.L3n4Addr, cause string) {
	m.failures.WithLabelValues(backend.String(), cause).Inc()
}

// forget drops a backend's series, when it is no longer checked.
func (m *metricSet) forget(backend lb.L3n4Addr) {
	m.state.DeleteLabelValues(backend.String())
	m.failures.DeletePartialMatch(prometheus.Labels{"backend": backend.String()})
}

var probeResults = [...]string{resultSuccess, resultFailure, resultTimeout}

func (m *metricSet) probed(kind probeKind, result string) {
	for i, r := range probeResults {
		if r == result {
			m.byResult[kind][i].Inc()
		}
	}
}

// Probe results, as the probes_total metric labels them.
const (
	resultSuccess = "success"
	resultFailure = "failure"
	resultTimeout = "timeout"
	// resultIgnored is a passive report about a backend that is not
	// checked here.
	resultIgnored = "ignored"
)

func newMetrics(reg prometheus.Registerer) *metricSet {
	name := func(n string) string { return prometheus.BuildFQName(metrics.Namespace, "health", n) }
	m := &metricSet{
		probes: metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name("probes_total"),
			Help: "Active probes of backends, by kind (tcp, http, https) and result (success, failure, timeout)"},
			[]string{"kind", "result"})),
		state: metrics.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name("breaker_state"),
			Help: "Each checked backend's breaker: 0 closed (healthy), 1 probation (healthy, one failure trips it), 2 open (tripped: no new flows while healthy backends exist)"},
			[]string{"backend"})),
		transitions: metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name("transitions_total"),
			Help: "Breaker transitions: tripped, reopened (on probation), recovered (probation passed)"},
			[]string{"transition"})),
		passive: metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name("passive_reports_total"),
			Help: "Connections reported through the passive interface, by result (success, failure, ignored: a backend not checked here)"},
			[]string{"result"})),
		failures: metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name("passive_failures_total"),
			Help: "Failed connections reported passively, per backend and cause (refused, timeout, error); the series go with the backend"},
			[]string{"backend", "cause"})),
		delay: metrics.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{Name: name("probe_delay_seconds"),
			Help:    "How late probes started after they were due",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}})),
		durations: metrics.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name("probe_duration_seconds"),
			Help:    "How long active probes took, by kind (tcp, http, https), whatever their result (a timeout takes the probe's timeout)",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}}, []string{"kind"})),
		backends: metrics.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name("backends"),
			Help: "Backends checked, by probe kind (none: passive reports only)"},
			[]string{"kind"})),
	}
	for i, r := range passiveResults {
		m.passiveN[i] = m.passive.WithLabelValues(r)
	}
	for k := probeTCP; int(k) < len(probeKindNames); k++ {
		for i, r := range probeResults {
			m.byResult[k][i] = m.probes.WithLabelValues(k.String(), r)
		}
		m.duration[k] = m.durations.WithLabelValues(k.String())
	}
	return m
}
