package k8s

import (
	"context"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/lbstate/lbstate/reflectors/kubeapi"
)

// Kinds are the kinds the reflector reads from a feed: Services,
// EndpointSlices, the local Node (cfg.K8sNodeName), every Node's labels,
// and the local Pods.
func Kinds(cfg Config) []kubeapi.FeedKind {
	return []kubeapi.FeedKind{
		kubeapi.Services(),
		kubeapi.EndpointSlices(),
		kubeapi.LocalNode(cfg.K8sNodeName),
		kubeapi.NodeLabels(),
		kubeapi.LocalPods(cfg.K8sNodeName),
	}
}

// Subscribe returns a feed for Run that subscribes to f's objects of
// Kinds: the reflector applies what it hands over, and its source reports
// f's connection and is degraded if not synced after cfg.K8sSyncTimeout.
func (r *Reflector) Subscribe(f kubeapi.Feed) func(ctx context.Context) error {
	if f.AllowsLoopback() {
		r.AcceptLoopbackEndpoints()
	}
	return func(ctx context.Context) error {
		r.src.ExpectSyncWithin(ctx, r.cfg.K8sSyncTimeout)
		return f.Subscribe(ctx, kubeapi.Subscription{
			Kinds: Kinds(r.cfg), Events: r, Invalid: r.fail, Connection: r.src,
		})
	}
}

// WatchAPI returns a feed for Run that watches client: Services,
// EndpointSlices, this node's Node and Pods, and every Node's labels
// (through kubeapi.NodeMetadataClient(client)). It pushes Synced once
// every informer's initial list was handed over.
func (r *Reflector) WatchAPI(client kubernetes.Interface) func(ctx context.Context) error {
	return r.WatchAPIWithMetadata(client, nil)
}

// WatchAPIWithMetadata is WatchAPI watching every Node's labels through
// meta, a metadata client of the same API server (nil:
// kubeapi.NodeMetadataClient(client)).
func (r *Reflector) WatchAPIWithMetadata(client kubernetes.Interface, meta metadata.Interface) func(ctx context.Context) error {
	return r.WatchClients(Clients{Client: client, Metadata: meta})
}

// Clients are one API server's clients, for WatchClients.
type Clients struct {
	Client kubernetes.Interface
	// Metadata watches every Node's labels (nil: NodeMetadataClient(Client)).
	Metadata metadata.Interface
}

// WatchClients is Subscribe to an API feed of c's own, stopped when the
// feed returns (a hive shares one kubeapi.APIFeed between its sources:
// kubeapi.Cell).
func (r *Reflector) WatchClients(c Clients) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		f := kubeapi.NewAPIFeed(kubeapi.Clients{Client: c.Client, Metadata: c.Metadata}, r.src.Log())
		defer f.Stop()
		f.Want(Kinds(r.cfg)...)
		return r.Subscribe(f)(ctx)
	}
}

// NodeMetadataClient is kubeapi.NodeMetadataClient.
func NodeMetadataClient(client kubernetes.Interface) metadata.Interface {
	return kubeapi.NodeMetadataClient(client)
}
