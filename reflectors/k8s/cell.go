package k8s

import (
	"context"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/reflectors/redirectpolicy"
	"github.com/lbstate/lbstate/reflectors/routes"
)

// Cell is the Kubernetes source: it watches the API server through the
// hive's kubernetes.Interface (a clientset from a kubeconfig, or
// client-go's fake one in tests) and declares what it sees as the k8s
// source (with a metadata.Interface of the same API server, if the hive
// has one, for every Node's labels, and a dynamic.Interface, if it has
// one, for CiliumLocalRedirectPolicies, Gateway API routes and SMI
// TrafficSplits; with routes.Cell it keeps their status). Its lists and
// watches go through a kubeapi.Connection: an API server outage is
// reported (lbstate_source_connected, degraded health, one WARN and one
// INFO line) and healed within about a second of its end, and a source
// not synced after --k8s-sync-timeout is degraded. Without a kubernetes.Interface
// (or with a nil one) it watches nothing, but still provides its Config
// (--k8s-* flags) and the local-redirect-policies table
// (redirectpolicy.Status rows, and the lrp/* script commands), which the
// manifests source (reflectors/file) uses too. It needs tables.Cell,
// job.Cell and a cell.Health provider; with metrics.Cell its counters are
// in the hive's registry.
var Cell = cell.Module(
	"k8s-source",
	"Feeds the load-balancing tables from Kubernetes",

	cell.Config(DefaultConfig),
	cell.Provide(
		redirectpolicy.NewTable,
		func(t statedb.RWTable[*redirectpolicy.Status]) statedb.Table[*redirectpolicy.Status] { return t },
		func(db *statedb.DB, t statedb.RWTable[*redirectpolicy.Status], fes statedb.Table[*lb.Frontend]) hive.ScriptCmdsOut {
			return hive.NewScriptCmds(redirectpolicy.ScriptCommands(db, t, fes))
		},
	),
	cell.Invoke(registerSource),
)

type sourceParams struct {
	cell.In

	Source reflectors.Params
	Config Config
	// Policies is the local-redirect-policies table (this cell's).
	Policies statedb.RWTable[*redirectpolicy.Status]
	Client   kubernetes.Interface `optional:"true"`
	// Metadata, from the same API server, watches every Node's labels
	// as metadata only; without it they come through Client.
	Metadata metadata.Interface `optional:"true"`
	// Dynamic, from the same API server, watches
	// CiliumLocalRedirectPolicies; without it there are none from the API.
	Dynamic dynamic.Interface `optional:"true"`
	// RouteStatus, from routes.Cell, keeps a status row per route.
	RouteStatus statedb.RWTable[*routes.Status] `optional:"true"`
}

func registerSource(p sourceParams) error {
	if p.Client == nil {
		return nil
	}
	if err := p.Config.Validate(); err != nil {
		return err
	}
	return reflectors.Register(p.Source, lb.SourceK8s, func(ctx context.Context, s *reflectors.Source) error {
		r, err := NewReflector(p.Config, s, lb.SourceK8s)
		if err != nil {
			return err
		}
		r.ReportPolicies(p.Policies)
		if p.RouteStatus != nil {
			r.PublishRouteStatus(p.RouteStatus)
		}
		s.Log().Info("Watching Kubernetes", "node", p.Config.K8sNodeName)
		return r.Run(ctx, r.WatchClients(Clients{Client: p.Client, Metadata: p.Metadata, Dynamic: p.Dynamic}))
	})
}
