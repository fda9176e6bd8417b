package clustermesh

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbstate/lbstate/metrics"
)

var (
	lastContactDesc = prometheus.NewDesc(metrics.Namespace+"_clustermesh_remote_last_contact_seconds",
		"Seconds since each remote cluster's etcd last answered (a watch event or a heartbeat); since the cluster was added when it never has",
		[]string{"cluster"}, nil)
	staleTimeoutDesc = prometheus.NewDesc(metrics.Namespace+"_clustermesh_remote_stale_timeout_seconds",
		"Each remote cluster's stale timeout: once its last contact is older, its backends are removed",
		[]string{"cluster"}, nil)
)

// remoteCollector exports, per remote cluster the importer follows, the
// age of its last contact beside its stale timeout, read when scraped: a
// cluster whose last contact is older than its stale timeout is stale
// (the importer removes its backends), and one that answered within two
// heartbeats (a third of it) is connected. Per cluster, because the
// source's own state covers every cluster at once.
type remoteCollector struct {
	now func() time.Time

	mu sync.Mutex
	im *Importer // nil until the source runs
}

// follow makes the collector report im's clusters.
func (rc *remoteCollector) follow(im *Importer) {
	rc.mu.Lock()
	rc.im = im
	rc.mu.Unlock()
}

func (rc *remoteCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- lastContactDesc
	ch <- staleTimeoutDesc
}

func (rc *remoteCollector) Collect(ch chan<- prometheus.Metric) {
	rc.mu.Lock()
	im := rc.im
	rc.mu.Unlock()
	if im == nil {
		return
	}
	now := rc.now()
	im.mu.Lock()
	defer im.mu.Unlock()
	for name, c := range im.clusters {
		c.mu.Lock()
		last := c.lastContact
		c.mu.Unlock()
		if last.IsZero() {
			last = c.added
		}
		ch <- prometheus.MustNewConstMetric(lastContactDesc, prometheus.GaugeValue, max(0, now.Sub(last).Seconds()), name)
		ch <- prometheus.MustNewConstMetric(staleTimeoutDesc, prometheus.GaugeValue, c.staleTimeout().Seconds(), name)
	}
}
