package k8s

import (
	"context"

	"github.com/cilium/hive/cell"

	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/reflectors/kubeapi"
)

// Cell is the Kubernetes services source: for every feed of the hive
// (kubeapi.FeedsGroup: the API server's, from kubeapi.Cell, and a
// manifests directory's, from file.Cell) it runs one source, named and
// declaring as the feed (k8s, file), that reads Services, EndpointSlices,
// the local Node, every Node's labels and the local Pods (host ports); the
// local node is kubeapi.NodeConfig's. Local redirect policies
// (redirectpolicy.Cell) and traffic-split routes (routes.Cell) are sources
// of their own, on the same feeds. Through the API
// feed an outage is reported (lbstate_source_connected, degraded health,
// one WARN and one INFO line) and healed within about a second of its
// end; a source not synced after --k8s-sync-timeout is degraded. Without
// a feed it runs nothing, but still provides its Flags (--k8s-*).
// It needs tables.Cell, job.Cell and a
// cell.Health provider; with metrics.Cell its counters are in the hive's
// registry.
var Cell = cell.Module(
	"k8s-source",
	"Feeds the load-balancing tables from Kubernetes",

	cell.Config(DefaultFlags),
	cell.Invoke(registerSource),
)

type sourceParams struct {
	cell.In

	Source reflectors.Params
	Flags  Flags
	Node   kubeapi.NodeConfig
	// Feeds are the hive's feeds of Kubernetes objects.
	Feeds []kubeapi.Feed `group:"kubernetes-feeds"`
}

func registerSource(p sourceParams) error {
	if len(p.Feeds) == 0 {
		return nil
	}
	cfg := Config{Flags: p.Flags, K8sNodeName: p.Node.K8sNodeName}
	if err := cfg.Validate(); err != nil {
		return err
	}
	for _, feed := range p.Feeds {
		feed.Want(Kinds(cfg)...)
		err := reflectors.Register(p.Source, feed.Source(), func(ctx context.Context, s *reflectors.Source) error {
			r, err := NewReflector(cfg, s, feed.Source())
			if err != nil {
				return err
			}
			s.Log().Info("Reading Kubernetes objects", "feed", feed.Source(), "node", cfg.K8sNodeName)
			return r.Run(ctx, r.Subscribe(feed))
		})
		if err != nil {
			return err
		}
	}
	return nil
}
