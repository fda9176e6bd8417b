package clustermesh

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lbstate/lbstate/internal/zapslog"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/metrics"
	"github.com/lbstate/lbstate/tables"
)

// DefaultLeaseTTL is the life of an exporter's keys once it stops
// renewing them.
const DefaultLeaseTTL = 30 * time.Second

const (
	// exportSettle gathers a burst of table changes into one export.
	exportSettle = 50 * time.Millisecond
	// maxTxnOps stays under etcd's default --max-txn-ops (128).
	maxTxnOps = 100
)

// Exporter publishes this cluster's global services, with their ready
// local backends, as ClusterService values in its etcd, under a lease:
// keys of an exporter that stopped renewing it expire. Once the initial
// export is written, so is the synced key. After that, only what changed
// is written, and the keys of services no longer global are deleted.
type Exporter struct {
	Self     Self
	Etcd     clientv3.Config // credentials never logged
	Writer   *tables.Writer
	DB       *statedb.DB
	Log      *slog.Logger
	LeaseTTL time.Duration // zero: DefaultLeaseTTL

	metrics exporterMetrics
}

type exporterMetrics struct {
	services prometheus.Gauge
	writes   *prometheus.CounterVec
}

// RegisterMetrics registers the exporter's metrics in reg (nil: none).
func (e *Exporter) RegisterMetrics(reg prometheus.Registerer) {
	e.metrics = exporterMetrics{
		services: metrics.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metrics.Namespace, Subsystem: "clustermesh", Name: "exported_services",
			Help: "Global services this cluster publishes to its etcd"})),
		writes: metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: "clustermesh", Name: "export_writes_total",
			Help: "Keys the exporter wrote to etcd, by operation (put, delete)"}, []string{"op"})),
	}
}

// Run exports until ctx is done or etcd fails (then the caller runs it
// again: a new lease, and every key written again under it).
func (e *Exporter) Run(ctx context.Context) error {
	if e.metrics.writes == nil {
		e.RegisterMetrics(nil)
	}
	if err := e.waitForLocalSources(ctx); err != nil {
		return nil
	}
	cfg := e.Etcd
	cfg.Context = ctx
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	cfg.Logger = zapslog.New(e.Log).Named("etcd-client") // the agent's log, not zap's JSON on stderr
	cli, err := clientv3.New(cfg)
	if err != nil {
		return err
	}
	defer cli.Close()

	ttl := e.LeaseTTL
	if ttl == 0 {
		ttl = DefaultLeaseTTL
	}
	lease, err := cli.Grant(ctx, max(1, int64(ttl.Round(time.Second)/time.Second)))
	if err != nil {
		return fmt.Errorf("etcd %v: lease: %w", cfg.Endpoints, err)
	}
	kctx, cancel := context.WithCancel(ctx)
	defer cancel()
	alive, err := cli.KeepAlive(kctx, lease.ID)
	if err != nil {
		return fmt.Errorf("etcd %v: lease keepalive: %w", cfg.Endpoints, err)
	}
	withLease := clientv3.WithLease(lease.ID)

	cc, _ := json.Marshal(e.Self.clusterConfig())
	if _, err := cli.Put(ctx, ClusterConfigKey(e.Self.Name), string(cc), withLease); err != nil {
		return fmt.Errorf("etcd %v: put %s: %w", cfg.Endpoints, ClusterConfigKey(e.Self.Name), err)
	}
	// What an earlier run left: rewritten under this lease if still
	// wanted, deleted if not.
	prefix := ServicesPrefix + e.Self.Name + "/"
	list, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return fmt.Errorf("etcd %v: list %s: %w", cfg.Endpoints, prefix, err)
	}
	written := map[string]string{}
	for _, kv := range list.Kvs {
		written[string(kv.Key)] = "" // never a value: written again
	}
	e.Log.Info("Exporting this cluster's global services", "cluster", e.Self.Name, "endpoints", cfg.Endpoints, "lease-ttl", ttl)

	synced := false
	for {
		txn := e.DB.ReadTxn()
		want := e.desired(txn)
		_, changed := e.Writer.Services().AllWatch(txn)
		_, backendsChanged := e.Writer.Backends().AllWatch(txn)
		if err := e.write(ctx, cli, written, want, withLease); err != nil {
			return fmt.Errorf("etcd %v: %w", cfg.Endpoints, err)
		}
		if !synced {
			now := time.Now().UTC().Format(time.RFC3339)
			var puts []clientv3.Op
			for _, k := range SyncedKeys(e.Self.Name) {
				puts = append(puts, clientv3.OpPut(k, now, withLease))
			}
			if _, err := cli.Txn(ctx).Then(puts...).Commit(); err != nil {
				return fmt.Errorf("etcd %v: put the synced keys: %w", cfg.Endpoints, err)
			}
			synced = true
			e.Log.Info("Initial export written", "services", len(want))
		}
		if err := waitForChange(ctx, alive, changed, backendsChanged); err != nil {
			return fmt.Errorf("etcd %v: %w", cfg.Endpoints, err)
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// waitForChange waits until a table changed and settled, reading the
// lease's keepalive answers meanwhile.
func waitForChange(ctx context.Context, alive <-chan *clientv3.LeaseKeepAliveResponse, services, backends <-chan struct{}) error {
	var settle <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-alive:
			if !ok {
				return errors.New("lease lost")
			}
		case <-services:
			services = nil
			settle = cmp.Or(settle, time.After(exportSettle))
		case <-backends:
			backends = nil
			settle = cmp.Or(settle, time.After(exportSettle))
		case <-settle:
			return nil
		}
	}
}

// waitForLocalSources waits until every source but the importer has
// synced: exporting a partial list would withdraw backends elsewhere,
// and waiting for the importer would wait for the other clusters'
// exporters, which wait for theirs.
func (e *Exporter) waitForLocalSources(ctx context.Context) error {
	for {
		pending := e.Writer.Services().PendingInitializers(e.DB.ReadTxn())
		if len(pending) == 0 || slices.Equal(pending, []string{SourceName}) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// write makes etcd hold want, writing only what differs from written
// (updated to match), in transactions of at most maxTxnOps.
func (e *Exporter) write(ctx context.Context, cli *clientv3.Client, written, want map[string]string, lease clientv3.OpOption) error {
	var ops []clientv3.Op
	var puts, deletes int
	for _, key := range slices.Sorted(maps.Keys(want)) {
		if v, found := written[key]; !found || v != want[key] {
			ops = append(ops, clientv3.OpPut(key, want[key], lease))
			puts++
		}
	}
	for _, key := range slices.Sorted(maps.Keys(written)) {
		if _, found := want[key]; !found {
			ops = append(ops, clientv3.OpDelete(key))
			deletes++
		}
	}
	for chunk := range slices.Chunk(ops, maxTxnOps) {
		if _, err := cli.Txn(ctx).Then(chunk...).Commit(); err != nil {
			return err
		}
	}
	clear(written)
	maps.Copy(written, want)
	e.metrics.writes.WithLabelValues("put").Add(float64(puts))
	e.metrics.writes.WithLabelValues("delete").Add(float64(deletes))
	e.metrics.services.Set(float64(len(want)))
	return nil
}

// desired is every exported key and its value, from the tables.
func (e *Exporter) desired(txn statedb.ReadTxn) map[string]string {
	out := map[string]string{}
	for svc := range e.Writer.Services().All(txn) {
		cs := e.ClusterService(txn, svc)
		if cs == nil {
			continue
		}
		v, err := json.Marshal(cs)
		if err != nil {
			continue // plain maps and strings: cannot fail
		}
		out[ServiceKey(cs.Cluster, cs.Namespace, cs.Name)] = string(v)
	}
	return out
}

// ClusterService is what the exporter publishes for a service: nil
// unless the service in force is global and not unshared. Its frontends
// are its ClusterIPs; its backends the active ones local sources
// declared (not other clusters'), each port under every name it serves.
func (e *Exporter) ClusterService(txn statedb.ReadTxn, svc *lb.Service) *ClusterService {
	p := svc.Policy()
	if p == nil || !p.IsShared() || svc.Name.Cluster() != "" {
		return nil
	}
	cs := &ClusterService{
		Cluster: e.Self.Name, Namespace: svc.Name.Namespace(), Name: svc.Name.Name(),
		Frontends: map[string]PortConfiguration{}, Backends: map[string]PortConfiguration{},
		Labels: map[string]string{}, Selector: map[string]string{},
		IncludeExternal: true, Shared: true, ClusterID: e.Self.ID,
	}
	for _, fe := range p.Frontends {
		if fe.Type == lb.SVCTypeClusterIP {
			addPort(cs.Frontends, fe.Address, fe.PortName)
		}
	}
	for b := range e.Writer.BackendsOf(txn, svc.Name) {
		for _, inst := range b.Instances {
			bp := &inst.Params
			if inst.Service != svc.Name || bp.Remote() || !exported(bp.State) {
				continue
			}
			names := bp.PortNames()
			if len(names) == 0 {
				names = []string{""}
			}
			for _, n := range names {
				addPort(cs.Backends, b.Address, n)
			}
			if bp.Zone != "" {
				if cs.Zones == nil {
					cs.Zones = map[string]BackendZone{}
				}
				z := BackendZone{Zone: bp.Zone, ForZones: []ForZone{}}
				for _, f := range bp.ForZones() {
					z.ForZones = append(z.ForZones, ForZone{Name: f})
				}
				cs.Zones[b.Address.Addr().String()] = z
			}
		}
	}
	return cs
}

// exported says whether a backend in state s is published: ready or
// serving, as Cilium's exporter decides (a terminating endpoint that
// still serves stays in the other clusters until it is gone, so their
// connections to it are not cut while it drains). Quarantined and
// maintenance backends are this cluster's health decisions, not shared.
func exported(s lb.BackendState) bool {
	return s == lb.BackendActive || s == lb.BackendTerminating
}

func addPort(m map[string]PortConfiguration, a lb.L3n4Addr, name string) {
	ip := a.Addr().String()
	if m[ip] == nil {
		m[ip] = PortConfiguration{}
	}
	m[ip][name] = &L4Addr{Protocol: a.Protocol().String(), Port: a.Port()}
}
