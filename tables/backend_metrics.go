package tables

import (
	"strconv"

	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/metrics"
)

var backendWeightDesc = prometheus.NewDesc(metrics.Namespace+"_frontend_backend_weight",
	"Each selected backend's effective weight in the frontend (route share × endpoint weight; 0: takes no new flows), by state",
	[]string{"service_namespace", "service_name", "frontend", "backend", "backend_cluster", "state", "route"}, nil)

// backendWeights exports every frontend's selected backends, read from
// the frontends table when scraped: the configured split and the
// backends' states, beside the datapath's measured one
// (lbstate_backend_flows_total has the same labels but state).
type backendWeights struct {
	db        *statedb.DB
	frontends statedb.Table[*lb.Frontend]
}

// NewBackendWeightCollector returns the collector of
// lbstate_frontend_backend_weight.
func NewBackendWeightCollector(db *statedb.DB, frontends statedb.Table[*lb.Frontend]) prometheus.Collector {
	return &backendWeights{db: db, frontends: frontends}
}

func (c *backendWeights) Describe(ch chan<- *prometheus.Desc) { ch <- backendWeightDesc }

func (c *backendWeights) Collect(ch chan<- prometheus.Metric) {
	for fe := range c.frontends.All(c.db.ReadTxn()) {
		ns, name, addr, route := fe.Service.Namespace(), fe.Service.Name(), fe.Address.String(), fe.RoutedBy()
		for _, b := range fe.Backends {
			ch <- prometheus.MustNewConstMetric(backendWeightDesc, prometheus.GaugeValue, float64(b.Weight),
				ns, name, addr, b.Address.String(), strconv.FormatUint(uint64(b.ClusterID), 10), b.State.String(), route)
		}
	}
}
