package clustermesh

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/metrics"
	"github.com/lbstate/lbstate/reflectors"
)

// Cell is the clustermesh: with --clustermesh-config it imports the
// global services of the remote clusters the directory names (the
// kvstore source), with --clustermesh-export it publishes this cluster's
// (the exporter); with neither it does nothing. Both need --cluster-name
// and --cluster-id. It needs tables.Cell, job.Cell and a cell.Health
// provider; with metrics.Cell its counters are in the hive's registry.
var Cell = cell.Module(
	"clustermesh",
	"Global services shared with other clusters over etcd",

	cell.Config(DefaultConfig),
	cell.Invoke(register),
)

type cellParams struct {
	cell.In

	Source reflectors.Params
	Config Config
	DB     *statedb.DB
}

func register(p cellParams) error {
	c := p.Config
	if !c.enabled() {
		return nil
	}
	// Settings that fail every run fail the start instead.
	if err := c.Validate(); err != nil {
		return err
	}
	if dir := c.ClustermeshConfig; dir != "" {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return fmt.Errorf("--clustermesh-config %s: not a directory", dir)
		}
		remotes := metrics.Register(p.Source.Registerer, &remoteCollector{now: time.Now})
		if err := reflectors.Register(p.Source, lb.SourceKVStore, func(ctx context.Context, s *reflectors.Source) error {
			im, err := NewImporter(c.self())
			if err != nil {
				return err
			}
			remotes.follow(im)
			d := newConfigDir(dir, c, im, s)
			im.initial = d.initial()
			s.Log().Info("Following the clustermesh config directory", "dir", dir, "clusters", len(im.initial))
			im.Start(ctx, s)
			d.follow(ctx)
			return nil
		}); err != nil {
			return err
		}
	}
	if file := c.ClustermeshExport; file != "" {
		etcd, _, err := LoadEtcdFile(file)
		if err != nil {
			return fmt.Errorf("--clustermesh-export: %w", err)
		}
		e := &Exporter{
			Self: c.self(), Etcd: etcd, Writer: p.Source.Writer, DB: p.DB,
			Log: p.Source.Log.With("component", "clustermesh-exporter"), LeaseTTL: c.ClustermeshLeaseTTL,
		}
		e.RegisterMetrics(p.Source.Registerer)
		g := p.Source.Jobs.NewGroup(p.Source.Health, job.WithLogger(p.Source.Log))
		g.Add(job.OneShot("clustermesh-exporter", func(ctx context.Context, _ cell.Health) error {
			return e.Run(ctx)
		}, job.WithRetry(-1, &job.ExponentialBackoff{Min: retryMin, Max: retryMax})))
	}
	return nil
}
