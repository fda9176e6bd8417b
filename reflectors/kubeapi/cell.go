package kubeapi

import (
	"log/slog"
	"os"

	"github.com/cilium/hive/cell"
	"github.com/spf13/pflag"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
)

// Cell provides the local node's name (NodeConfig: --k8s-node-name) and
// the API server's feed (an APIFeed) into FeedsGroup when
// the hive has a kubernetes.Interface (a clientset from a kubeconfig, or
// client-go's fake one in tests): with a metadata.Interface of the same
// API server, if the hive has one, for every Node's labels, and a
// dynamic.Interface, if it has one, for the CRD-backed kinds. Without a
// clientset (or with a nil one) it provides no feed. The feed's informers
// stop when the hive does.
var Cell = cell.Module(
	"kubernetes-api-feed",
	"Kubernetes objects from the API server for every source that reads them",

	cell.Config(DefaultNodeConfig),
	cell.Provide(provideAPIFeed),
)

// NodeConfig names the local node, whose Node and Pods the sources read
// (LocalNode, LocalPods): one flag for every source of the hive.
type NodeConfig struct {
	// K8sNodeName is the local node's name (default: $NODE_NAME, else
	// the host name).
	K8sNodeName string
}

// DefaultNodeConfig is $NODE_NAME, else the host name.
var DefaultNodeConfig = NodeConfig{K8sNodeName: defaultNodeName()}

func defaultNodeName() string {
	if n := os.Getenv("NODE_NAME"); n != "" {
		return n
	}
	n, _ := os.Hostname()
	return n
}

// Flags registers the configuration's flags.
func (def NodeConfig) Flags(flags *pflag.FlagSet) {
	flags.String("k8s-node-name", def.K8sNodeName, "The local node's name")
}

type apiFeedParams struct {
	cell.In

	Lifecycle cell.Lifecycle
	Log       *slog.Logger
	Client    kubernetes.Interface `optional:"true"`
	Metadata  metadata.Interface   `optional:"true"`
	Dynamic   dynamic.Interface    `optional:"true"`
}

func provideAPIFeed(p apiFeedParams) FeedsOut {
	if p.Client == nil {
		return FeedsOut{}
	}
	f := NewAPIFeed(Clients{Client: p.Client, Metadata: p.Metadata, Dynamic: p.Dynamic}, p.Log)
	p.Lifecycle.Append(cell.Hook{OnStop: func(cell.HookContext) error {
		f.Stop()
		return nil
	}})
	return FeedsOut{Feeds: []Feed{f}}
}
