package datapath

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/metrics"
)

// ctGC is the conntrack garbage collector: every interval it deletes the
// expired entries of lb_ct (bpf.CollectConntrack), so that closed and
// idle flows leave the LRU map before the kernel has to evict live ones
// to make room. As Cilium's CT GC, it runs from the agent and reports the
// map's entries, what it removed and the map's pressure. lb_sock_ct is
// not collected: a connected socket's entry is written once, at
// connect(), and getpeername() needs it for as long as the connection
// lasts, however long after its expiry that is; the socket's close
// deletes it (lb_sock_release), and the LRU takes unconnected UDP
// sockets' entries.
type ctGC struct {
	maps     *bpf.Maps
	log      *slog.Logger
	interval time.Duration
	// reapUDP, when socket LB is on, destroys the connected UDP sockets
	// whose backend is gone (bpf.Datapath.DestroyOrphanedUDPSockets):
	// after each collection, so within an interval of the deletion.
	reapUDP func() (int, error)
	// dp is the loaded datapath, set before run.
	dp *bpf.Datapath

	entries  *prometheus.GaugeVec
	expired  *prometheus.CounterVec
	pressure *prometheus.GaugeVec
	runs     *prometheus.CounterVec
}

func newCTGC(maps *bpf.Maps, log *slog.Logger, interval time.Duration, reg prometheus.Registerer) *ctGC {
	labels := []string{"map"}
	g := &ctGC{
		maps: maps, log: log, interval: interval,
		entries: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metrics.Namespace, Name: "datapath_conntrack_entries",
			Help: "Entries of the reference datapath's conntrack map at the last garbage collection, before it"}, labels),
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Name: "datapath_conntrack_expired_removed_total",
			Help: "Expired conntrack entries the garbage collector removed"}, labels),
		pressure: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metrics.Namespace, Name: "datapath_conntrack_map_pressure",
			Help: "How full the conntrack map was at the last garbage collection, before it: entries over max_entries (0 to 1)"}, labels),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Name: "datapath_conntrack_gc_runs_total",
			Help: "Garbage collections of the conntrack map, by outcome (ok, error)"}, []string{"map", "outcome"}),
	}
	g.entries = metrics.Register(reg, g.entries)
	g.expired = metrics.Register(reg, g.expired)
	g.pressure = metrics.Register(reg, g.pressure)
	g.runs = metrics.Register(reg, g.runs)
	return g
}

// run collects every interval until ctx ends.
func (g *ctGC) run(ctx context.Context) {
	t := time.NewTicker(g.interval)
	defer t.Stop()
	for {
		g.collect()
		g.reap()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// reap destroys the connected UDP sockets whose backend is gone.
func (g *ctGC) reap() {
	if g.reapUDP == nil {
		return
	}
	n, err := g.reapUDP()
	if err != nil {
		g.log.Warn("Destroying connected UDP sockets of deleted backends failed", "error", err)
		return
	}
	if n > 0 {
		g.log.Info("Destroyed connected UDP sockets of deleted backends", "sockets", n)
	}
}

// collectOne collects ct, through the datapath when it is loaded: it
// also tells the programs the client ports of ct's flows.
func (g *ctGC) collectOne(ct bpf.Map[bpf.CTKey, bpf.CTValue]) (bpf.CTCollection, error) {
	if g.dp != nil && ct == g.maps.Conntrack {
		return g.dp.CollectConntrack(g.maps)
	}
	return bpf.CollectConntrack(g.maps, ct)
}

// collect runs one garbage collection.
func (g *ctGC) collect() {
	for _, ct := range []bpf.Map[bpf.CTKey, bpf.CTValue]{g.maps.Conntrack} {
		if ct == nil {
			continue
		}
		name := ct.Name()
		c, err := g.collectOne(ct)
		if err != nil {
			g.runs.WithLabelValues(name, "error").Inc()
			g.log.Warn("Conntrack garbage collection failed", "map", name, "error", err)
			continue
		}
		g.runs.WithLabelValues(name, "ok").Inc()
		g.entries.WithLabelValues(name).Set(float64(c.Entries))
		g.expired.WithLabelValues(name).Add(float64(c.Expired))
		g.pressure.WithLabelValues(name).Set(c.Pressure())
	}
}
