package tables

import (
	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/metrics"
)

// rowCounter is a gauge that sums count over a table's rows when
// scraped, rather than a count the Writer keeps: a count kept beside the
// tables would drift from them when a write transaction is aborted.
type rowCounter[Obj any] struct {
	db    *statedb.DB
	table statedb.Table[Obj]
	desc  *prometheus.Desc
	count func(Obj) int
}

func (c *rowCounter[Obj]) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *rowCounter[Obj]) Collect(ch chan<- prometheus.Metric) {
	n := 0
	for obj := range c.table.All(c.db.ReadTxn()) {
		n += c.count(obj)
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n))
}

// NewTopologyCollector returns the collector of
// lbstate_topology_frontends_without_backends: the frontends whose strict
// topology keys leave them no backend for new flows on this node.
func NewTopologyCollector(db *statedb.DB, frontends statedb.Table[*lb.Frontend]) prometheus.Collector {
	return &rowCounter[*lb.Frontend]{db: db, table: frontends, desc: prometheus.NewDesc(
		metrics.Namespace+"_topology_frontends_without_backends",
		"Frontends whose topology keys (without \"*\") leave no backend for new flows on this node",
		nil, nil),
		count: func(fe *lb.Frontend) int {
			if fe.TopologyLevel() == lb.TopologyLevelNone {
				return 1
			}
			return 0
		}}
}

// NewConflictCollector returns the collector of
// lbstate_frontend_address_conflicts: the addresses services declare but
// another service owns (a redirect policy's address a Service has, two
// LoadBalancers on one IP). The Writer logs each once; the gauge keeps
// them visible while they last.
func NewConflictCollector(db *statedb.DB, services statedb.Table[*lb.Service]) prometheus.Collector {
	return &rowCounter[*lb.Service]{db: db, table: services, desc: prometheus.NewDesc(
		metrics.Namespace+"_frontend_address_conflicts",
		"Frontend addresses services declare but another service owns",
		nil, nil),
		count: func(svc *lb.Service) int { return len(svc.Conflicts()) }}
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
	metrics.Register(p.Registerer, NewBackendWeightCollector(p.DB, p.Tables.frontends))
	metrics.Register(p.Registerer, NewZoneRefusedCollector())
}
