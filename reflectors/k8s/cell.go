package k8s

import (
	"context"
	"log/slog"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"k8s.io/client-go/kubernetes"

	"github.com/lbstate/lbstate/tables"
)

// Cell runs the Kubernetes reflector. It needs a kubernetes.Interface (a
// clientset from a kubeconfig, or client-go's fake one in tests),
// tables.Cell, job.Cell and a cell.Health provider.
var Cell = cell.Module(
	"k8s-reflector",
	"Feeds the load-balancing tables from Kubernetes",

	cell.Config(DefaultConfig),
	cell.ProvidePrivate(job.Registry.NewGroup),
	cell.Provide(func(cfg Config, w *tables.Writer, client kubernetes.Interface, log *slog.Logger) (*Reflector, error) {
		return NewReflector(cfg, w, client, log)
	}),
	cell.Invoke(func(g job.Group, r *Reflector) {
		g.Add(job.OneShot("k8s-reflector", func(ctx context.Context, _ cell.Health) error { return r.Run(ctx) }))
	}),
)
