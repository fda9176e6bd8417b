package reconciler

import (
	"context"
	"log/slog"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// Cell reconciles the frontends table into the maps (*bpf.Maps, from
// bpf.Cell). It provides the statedb reconciler (for WaitUntilReconciled
// and Prune) and the *Metrics it records, and registers the maps' room
// (lbstate_map_*) in the hive's registry, if there is one.
// It needs statedb.Cell, job.Cell, a cell.Health provider, tables.Cell and
// bpf.Cell.
var Cell = cell.Module(
	"lb-reconciler",
	"Writes the frontends into the BPF maps",

	cell.Config(DefaultConfig),
	cell.ProvidePrivate(
		job.Registry.NewGroup,
		newCellOps,
	),
	cell.Provide(
		newCellMetrics,
		register,
	),
	// Providers are built on demand: make sure the reconciler is.
	cell.Invoke(func(reconciler.Reconciler[*lb.Frontend]) {}),
	cell.Invoke(registerMapMetrics),
)

// newCellMetrics registers the metrics in the hive's registry, if it has
// one (metrics.Cell).
func newCellMetrics(p struct {
	cell.In
	Registerer prometheus.Registerer `optional:"true"`
}) *Metrics {
	return NewMetrics(p.Registerer)
}

// newCellOps returns the ops, restoring what the pinned maps hold from
// the hive's start on, beside the sources' first listing: the ops wait
// for it, and a failed restore shuts the hive down.
func newCellOps(cfg Config, maps *bpf.Maps, log *slog.Logger, frontends statedb.Table[*lb.Frontend], lc cell.Lifecycle, sd hive.Shutdowner) (*ops, error) {
	s, err := cfg.settings()
	if err != nil {
		return nil, err
	}
	o := newUnrestoredOps(maps, s, log, frontends)
	lc.Append(cell.Hook{
		OnStart: func(cell.HookContext) error {
			go func() {
				err := o.restore()
				if err != nil {
					log.Error("Restoring from the pinned maps failed: nothing is written to them", "error", err)
					sd.Shutdown(hive.ShutdownWithError(err))
				}
				o.finishRestore(err)
			}()
			return nil
		},
		OnStop: func(cell.HookContext) error {
			<-o.restored // before the maps close
			o.mu.Lock()
			o.stopped = true
			o.mu.Unlock()
			return nil
		},
	})
	return o, nil
}

func register(p reconciler.Params, cfg Config, frontends tables.ReconcilerFrontends, o *ops, m *Metrics) (reconciler.Reconciler[*lb.Frontend], error) {
	r, err := reconciler.Register(
		p,
		frontends.RWTable(),
		(*lb.Frontend).Clone,
		(*lb.Frontend).SetStatus,
		(*lb.Frontend).GetStatus,
		o,
		o,
		reconciler.WithMetrics(m),
		reconciler.WithPruning(pruneInterval),
		reconciler.WithRetry(retryMinBackoff, max(retryMinBackoff, cfg.LBRetryMaxBackoff)),
		reconciler.WithRoundLimits(roundSize, rate.NewLimiter(roundRate, roundBurst)),
	)
	if err != nil {
		return nil, err
	}
	k := newKicker()
	p.JobGroup.Add(job.OneShot("retry-frontends-that-fit", func(ctx context.Context, _ cell.Health) error {
		return k.run(ctx, p.DB, frontends.RWTable(), r)
	}))
	o.mu.Lock()
	o.requestPrune, o.kick, o.onFailure = r.Prune, k.add, m.frontendFailed
	o.mu.Unlock()
	return r, nil
}
