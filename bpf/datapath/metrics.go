package datapath

import (
	"slices"
	"strconv"
	"sync"

	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/metrics"
)

var (
	backendLabels  = []string{"service_namespace", "service_name", "frontend", "backend", "backend_cluster", "route"}
	frontendLabels = []string{"service_namespace", "service_name", "frontend", "reason"}

	flowsDesc = prometheus.NewDesc(metrics.Namespace+"_backend_flows_total",
		"New flows (and socket connects) the datapath sent to the backend through the frontend", backendLabels, nil)
	packetsDesc = prometheus.NewDesc(metrics.Namespace+"_backend_packets_total",
		"Packets of the backend's flows through the frontend, both ways, as the datapath saw them", backendLabels, nil)
	bytesDesc = prometheus.NewDesc(metrics.Namespace+"_backend_bytes_total",
		"Bytes (from the L2 header on) of the backend's flows through the frontend, both ways, as tc saw them", backendLabels, nil)
	dropsDesc = prometheus.NewDesc(metrics.Namespace+"_frontend_drops_total",
		"Packets (and socket connects) to the frontend the datapath dropped, by reason", frontendLabels, nil)
)

// collector exports lb_counters and lb_drops, labelled from the frontends
// table and lb_backends. A pair of frontend and backend that is gone (the
// frontend, or the backend, or the frontend's use of it) is exported once
// more with the labels it had, then its entry is deleted from the map, so
// that its series disappear after one scrape saw their last values.
type collector struct {
	maps      *bpf.Maps
	db        *statedb.DB
	frontends statedb.Table[*lb.Frontend]

	mu sync.Mutex
	// The labels of the entries seen at the last scrape.
	counterLabels map[bpf.CounterKey][]string
	dropLabels    map[bpf.DropKey][]string
}

func newCollector(maps *bpf.Maps, db *statedb.DB, frontends statedb.Table[*lb.Frontend]) *collector {
	return &collector{
		maps: maps, db: db, frontends: frontends,
		counterLabels: map[bpf.CounterKey][]string{}, dropLabels: map[bpf.DropKey][]string{},
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{flowsDesc, packetsDesc, bytesDesc, dropsDesc} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	byID := map[uint32]*lb.Frontend{}
	for fe := range c.frontends.All(c.db.ReadTxn()) {
		if fe.ID != 0 {
			byID[fe.ID] = fe
		}
	}
	c.collectCounters(ch, byID)
	c.collectDrops(ch, byID)
}

func (c *collector) collectCounters(ch chan<- prometheus.Metric, byID map[uint32]*lb.Frontend) {
	seen := map[bpf.CounterKey][]string{}
	var gone []bpf.CounterKey
	c.maps.Counters.Iterate(func(k bpf.CounterKey, perCPU []bpf.CounterValue) bool {
		labels, live := c.backendLabels(k, byID)
		if !live {
			gone = append(gone, k)
		}
		if labels == nil {
			return true // gone before any scrape: nothing to name it by
		}
		seen[k] = labels
		v := bpf.SumCounters(perCPU)
		ch <- prometheus.MustNewConstMetric(flowsDesc, prometheus.CounterValue, float64(v.Flows), labels...)
		ch <- prometheus.MustNewConstMetric(packetsDesc, prometheus.CounterValue, float64(v.Packets), labels...)
		ch <- prometheus.MustNewConstMetric(bytesDesc, prometheus.CounterValue, float64(v.Bytes), labels...)
		return true
	})
	c.maps.Counters.BatchDelete(gone) // a failure leaves them for the next scrape
	c.counterLabels = seen
}

// backendLabels returns the labels of a counter, and whether its frontend
// still uses its backend; the labels of the last scrape when it does not.
func (c *collector) backendLabels(k bpf.CounterKey, byID map[uint32]*lb.Frontend) ([]string, bool) {
	fe := byID[k.RevNatID]
	b, ok, err := c.maps.Backends.Lookup(k.BackendID)
	if fe == nil || !ok || err != nil {
		return c.counterLabels[k], false
	}
	addr := b.L3n4Addr()
	if !slices.ContainsFunc(fe.Backends, func(r lb.BackendRef) bool { return r.Address == addr }) {
		return c.counterLabels[k], false
	}
	return []string{
		fe.Service.Namespace(), fe.Service.Name(), fe.Address.String(),
		addr.String(), strconv.FormatUint(uint64(b.ClusterID), 10), fe.RoutedBy(),
	}, true
}

func (c *collector) collectDrops(ch chan<- prometheus.Metric, byID map[uint32]*lb.Frontend) {
	seen := map[bpf.DropKey][]string{}
	var gone []bpf.DropKey
	c.maps.Drops.Iterate(func(k bpf.DropKey, perCPU []uint64) bool {
		labels := c.dropLabels[k]
		reason, ok := bpf.DropReasons[k.Reason]
		if !ok {
			reason = strconv.FormatUint(uint64(k.Reason), 10)
		}
		if fe := byID[k.RevNatID]; fe != nil {
			labels = []string{fe.Service.Namespace(), fe.Service.Name(), fe.Address.String(), reason}
		} else if k.RevNatID == 0 {
			// A drop the datapath could not tie to a frontend (a
			// fragment without its first one, a master rewritten under
			// every read): the node's, without service labels.
			labels = []string{"", "", "", reason}
		} else {
			gone = append(gone, k)
		}
		if labels == nil {
			return true
		}
		seen[k] = labels
		var n uint64
		for _, v := range perCPU {
			n += v
		}
		ch <- prometheus.MustNewConstMetric(dropsDesc, prometheus.CounterValue, float64(n), labels...)
		return true
	})
	c.maps.Drops.BatchDelete(gone)
	c.dropLabels = seen
}
