package routes

import (
	"context"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/reflectors/kubeapi"
)

// Cell is the traffic-split routes source: for every feed of the hive
// (kubeapi.FeedsGroup) it runs one source, named FEED-routes and
// declaring as the feed (k8s, file), that reads the Gateway API's routes
// and ReferenceGrants and SMI TrafficSplits (Kinds) and writes their
// routes through the Writer (Controller), keeping a status row per
// object. It provides the status table (statedb.RWTable[*Status] for
// routestatus.Cell, statedb.Table[*Status] for readers: `lbctl routes`).
// It needs tables.Cell, job.Cell and a cell.Health provider, and a feed
// (kubeapi.Cell with a clientset, or file.Cell with --manifests); with
// metrics.Cell its counters are in the hive's registry.
var Cell = cell.Module(
	"routes",
	"Traffic-split routes as routes of their parent Services",

	cell.Provide(
		NewStatusTable,
		func(t statedb.RWTable[*Status]) statedb.Table[*Status] { return t },
	),
	cell.Invoke(registerSources),
)

// Kinds are the kinds a Controller reads from a feed: every kind of
// Resources, each while its CRD is served.
func Kinds() []kubeapi.FeedKind {
	kinds := make([]kubeapi.FeedKind, 0, len(Resources))
	for _, res := range Resources {
		kinds = append(kinds, kubeapi.CRDKind(res.Kind, res.Versions, AddToScheme, readUnstructured))
	}
	return kinds
}

func readUnstructured(u *unstructured.Unstructured, _ bool) (runtime.Object, error) {
	return FromUnstructured(u)
}

type sourceParams struct {
	cell.In

	Source reflectors.Params
	Status statedb.RWTable[*Status]
	Feeds  []kubeapi.Feed `group:"kubernetes-feeds"`
}

func registerSources(p sourceParams) error {
	for _, feed := range p.Feeds {
		feed.Want(Kinds()...)
		run := func(ctx context.Context, s *reflectors.Source) error {
			c := NewController(s, feed.Source(), p.Status)
			return c.Run(ctx, c.Subscribe(feed))
		}
		if err := reflectors.RegisterAs(p.Source, feed.Source().String()+"-routes", feed.Source(), run); err != nil {
			return err
		}
	}
	return nil
}

// Subscribe returns a feed for Run that subscribes to f's Kinds.
func (c *Controller) Subscribe(f kubeapi.Feed) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		return f.Subscribe(ctx, kubeapi.Subscription{Kinds: Kinds(), Events: c, Invalid: c.fail, Connection: c.src})
	}
}
