// Package metrics gives an lbstate agent one Prometheus registry. Cell
// provides it; lbstate's cells (tables, reconciler, sources) register
// their client_golang collectors in it when it is there, and the agent
// serves it with Handler. Without Cell, components still count, in
// collectors that nobody registers.
package metrics

import (
	"errors"
	"net/http"

	"github.com/cilium/hive/cell"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes every lbstate metric.
const Namespace = "lbstate"

// Cell provides the registry (*prometheus.Registry, and as
// prometheus.Registerer and prometheus.Gatherer) with the Go runtime and
// process collectors, and StateDB's table metrics (statedb.Metrics).
var Cell = cell.Module(
	"metrics",
	"Prometheus registry of lbstate metrics",

	cell.Provide(
		NewRegistry,
		func(r *prometheus.Registry) prometheus.Registerer { return r },
		func(r *prometheus.Registry) prometheus.Gatherer { return r },
		newTableMetrics,
	),
)

// NewRegistry returns a registry with the Go runtime and process
// collectors.
func NewRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// Handler serves what g gathers in the Prometheus exposition formats.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Register registers c in reg and returns it, or the equal collector
// already registered there, so that components of one kind (two sources,
// say) share their metric families. With a nil reg, c is returned
// unregistered.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			if existing, ok := already.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err) // two different collectors of one name: a programming error
	}
	return c
}
