package tables

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/metrics"
)

// zoneRefusedMetric counts the zone names lb.ZoneOf gave no handle.
const zoneRefusedMetric = metrics.Namespace + "_zone_names_refused_total"

// NewZoneRefusedCollector returns the collector of
// lbstate_zone_names_refused_total: how many times a backend's zone found
// the process's table of zone names (lb.Zone) full, and was selected
// without its zone (no zone ID in the datapath, none in its frontend).
func NewZoneRefusedCollector() prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: zoneRefusedMetric,
		Help: "Backend zones selected without their zone: the process's table of zone names was full",
	}, func() float64 { return float64(lb.ZoneNamesRefused()) })
}

// noteRefusedZone logs a backend of the service whose zone the selection
// (sc) found no handle for. A broken source naming a zone per backend
// would log on every selection: the Writer logs when the count has
// doubled since it last did, and the counter has every one.
func (w *Writer) noteRefusedZone(name lb.ServiceName, fe lb.L3n4Addr, sc *selectScratch) {
	p := sc.refusedZone
	if p == nil {
		return
	}
	sc.refusedZone = nil
	n := lb.ZoneNamesRefused()
	if last := w.zoneRefusedLogged.Load(); n < 2*last || !w.zoneRefusedLogged.CompareAndSwap(last, n) {
		return
	}
	w.log.Warn("Backend selected without its zone: the process's table of zone names is full",
		"service", name, "frontend", fe, "backend", p.Address, "field", "zone", "zone", p.Zone,
		"refused", n, "metric", zoneRefusedMetric)
}
