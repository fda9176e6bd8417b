package routestatus

import (
	"context"
	"log/slog"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors/routes"
)

// Cell writes the status of the Kubernetes source's routes (--route-status,
// on by default) when the hive has a kubernetes.Interface (for the
// Lease) and a dynamic.Interface (for the routes) of one API server and
// routes.Cell's table; otherwise it does nothing. It needs tables.Cell,
// job.Cell and a cell.Health provider; with metrics.Cell its metrics
// (lbstate_route_status_writes_total{result},
// lbstate_route_status_leader) are in the hive's registry.
var Cell = cell.Module(
	"route-status-writer",
	"Writes Gateway API route status one agent at a time",

	cell.Config(DefaultConfig),
	cell.Invoke(register),
)

type cellParams struct {
	cell.In

	Config     Config
	DB         *statedb.DB
	Services   statedb.Table[*lb.Service]
	Routes     statedb.Table[*routes.Status] `optional:"true"`
	Client     kubernetes.Interface          `optional:"true"`
	Dynamic    dynamic.Interface             `optional:"true"`
	Jobs       job.Registry
	Health     cell.Health
	Log        *slog.Logger
	Registerer prometheus.Registerer `optional:"true"`
}

func register(p cellParams) error {
	if !p.Config.RouteStatus || p.Client == nil || p.Dynamic == nil || p.Routes == nil {
		return nil
	}
	if err := p.Config.Validate(); err != nil {
		return err
	}
	log := p.Log.With("component", "route-status")
	w := NewWriter(Params{
		Config: p.Config, DB: p.DB, Routes: p.Routes, Services: p.Services, Dynamic: p.Dynamic,
		Source: lb.SourceK8s, Log: log, Registerer: p.Registerer,
	})
	g := p.Jobs.NewGroup(p.Health, job.WithLogger(log))
	g.Add(job.OneShot("route-status", func(ctx context.Context, h cell.Health) error {
		return w.Run(ctx, p.Client.CoordinationV1(), h)
	}, job.WithRetry(-1, &job.ExponentialBackoff{Min: time.Second, Max: time.Minute})))
	return nil
}
