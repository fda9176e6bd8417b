package tables

import (
	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/metrics"
)

// topologyCollector counts, when scraped, the frontends whose strict
// topology keys leave them no backend for new flows on this node. It
// reads the frontends table then, rather than keeping a count the Writer
// updates: a count kept beside the tables would drift from them when a
// write transaction is aborted.
type topologyCollector struct {
	db        *statedb.DB
	frontends statedb.Table[*lb.Frontend]
	desc      *prometheus.Desc
}

// NewTopologyCollector returns the collector of
// lbstate_topology_frontends_without_backends.
func NewTopologyCollector(db *statedb.DB, frontends statedb.Table[*lb.Frontend]) prometheus.Collector {
	return &topologyCollector{db: db, frontends: frontends, desc: prometheus.NewDesc(
		metrics.Namespace+"_topology_frontends_without_backends",
		"Frontends whose topology keys (without \"*\") leave no backend for new flows on this node",
		nil, nil)}
}

func (c *topologyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *topologyCollector) Collect(ch chan<- prometheus.Metric) {
	n := 0
	for fe := range c.frontends.All(c.db.ReadTxn()) {
		if fe.TopologyLevel == lb.TopologyLevelNone {
			n++
		}
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n))
}

// conflictCollector counts, when scraped, the addresses services declare
// but another service owns (a redirect policy's address a Service has,
// two LoadBalancers on one IP): each is logged once by the Writer, and
// the gauge keeps them visible while they last.
type conflictCollector struct {
	db       *statedb.DB
	services statedb.Table[*lb.Service]
	desc     *prometheus.Desc
}

// NewConflictCollector returns the collector of
// lbstate_frontend_address_conflicts.
func NewConflictCollector(db *statedb.DB, services statedb.Table[*lb.Service]) prometheus.Collector {
	return &conflictCollector{db: db, services: services, desc: prometheus.NewDesc(
		metrics.Namespace+"_frontend_address_conflicts",
		"Frontend addresses services declare but another service owns",
		nil, nil)}
}

func (c *conflictCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *conflictCollector) Collect(ch chan<- prometheus.Metric) {
	n := 0
	for svc := range c.services.All(c.db.ReadTxn()) {
		n += len(svc.Conflicts)
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n))
}

type metricsParams struct {
	cell.In

	DB         *statedb.DB
	Tables     *tableSet
	Registerer prometheus.Registerer `optional:"true"`
}

func registerMetrics(p metricsParams) {
	metrics.Register(p.Registerer, NewTopologyCollector(p.DB, p.Tables.frontends))
	metrics.Register(p.Registerer, NewConflictCollector(p.DB, p.Tables.services))
}
