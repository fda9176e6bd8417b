package routestatus

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbstate/lbstate/metrics"
)

// Write results, as lbstate_route_status_writes_total labels them.
const (
	resultWritten  = "written"  // status.parents updated
	resultConflict = "conflict" // the route changed meanwhile: read again and retried
	resultError    = "error"    // any other failure: retried with backoff
)

type metricSet struct {
	writes *prometheus.CounterVec
	leader prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metricSet {
	name := func(n string) string { return prometheus.BuildFQName(metrics.Namespace, "route_status", n) }
	m := &metricSet{
		writes: metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name("writes_total"),
			Help: "Route status writes (status subresource updates), by result: written, conflict (read again and retried), error (retried with backoff). An unchanged status is not written."},
			[]string{"result"})),
		leader: metrics.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: name("leader"),
			Help: "1 while this agent holds the route status Lease and writes route status"})),
	}
	for _, r := range []string{resultWritten, resultConflict, resultError} {
		m.writes.WithLabelValues(r)
	}
	return m
}
