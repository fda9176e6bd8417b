package k8s

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/lbstate/lbstate/reflectors/kubeapi"
)

// WatchAPI returns a feed for Run that watches client: Services,
// EndpointSlices, this node's Node and Pods, and every Node's labels
// (through NodeMetadataClient(client)). It pushes Synced once every
// informer's initial list was handed over.
func (r *Reflector) WatchAPI(client kubernetes.Interface) func(ctx context.Context) error {
	return r.WatchAPIWithMetadata(client, nil)
}

// WatchAPIWithMetadata is WatchAPI watching every Node's labels through
// meta, a metadata client of the same API server (nil:
// NodeMetadataClient(client)).
func (r *Reflector) WatchAPIWithMetadata(client kubernetes.Interface, meta metadata.Interface) func(ctx context.Context) error {
	return r.WatchClients(Clients{Client: client, Metadata: meta})
}

// Clients are one API server's clients, for WatchClients.
type Clients struct {
	Client kubernetes.Interface
	// Metadata watches every Node's labels (nil: NodeMetadataClient(Client)).
	Metadata metadata.Interface
	// Dynamic, if set, watches CiliumLocalRedirectPolicies, the Gateway
	// API's routes and ReferenceGrants, and SMI TrafficSplits, each while
	// the API server serves its CRD (kubeapi.CRDs: a CRD installed or
	// removed later is followed).
	Dynamic dynamic.Interface
}

// WatchClients is WatchAPI over c's clients.
func (r *Reflector) WatchClients(c Clients) func(ctx context.Context) error {
	client, meta := c.Client, c.Metadata
	if meta == nil {
		meta = NodeMetadataClient(client)
	}
	return func(ctx context.Context) error {
		handler := r.handler()
		// Every list and watch goes through conn, which reports the
		// source's connection and retries at once while the API server
		// is away.
		conn := kubeapi.NewConnection(r.src)
		r.src.ExpectSyncWithin(ctx, r.cfg.K8sSyncTimeout)
		nodes := nodeLabelsInformers(conn, meta)
		factories, infs := r.typedInformers(conn, client)
		// A registration has synced once its handler has been given every
		// object of the initial list, which is what marking the source
		// synced needs (an informer's own sync only says its store is
		// filled).
		var synced []cache.InformerSynced
		for _, inf := range append(infs,
			nodes.ForResource(nodesResource).Informer(), // every node's labels (topology keys)
		) {
			reg, err := inf.AddEventHandler(handler)
			if err != nil {
				return err
			}
			synced = append(synced, reg.HasSynced)
		}
		if c.Dynamic != nil {
			crds, err := kubeapi.NewCRDs(c.Dynamic, c.Client.Discovery(), r.src.Log(), r.crdKinds()...)
			if err != nil {
				return err
			}
			crds.DiscoveryInterval = r.crdPoll
			crds.Connection = conn
			crdCtx, stop := context.WithCancel(ctx)
			var wg sync.WaitGroup
			wg.Go(func() { crds.Run(crdCtx) })
			defer wg.Wait()
			defer stop() // also on an early return, before the wait
			synced = append(synced, crds.HasSynced)
		}
		for _, f := range factories {
			f.Start(ctx.Done())
			defer f.Shutdown()
		}
		nodes.Start(ctx.Done())
		defer nodes.Shutdown()
		if cache.WaitForCacheSync(ctx.Done(), synced...) {
			r.Synced()
		}
		<-ctx.Done()
		return nil
	}
}

// handler pushes an informer's notifications.
func (r *Reflector) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.Push(obj, false) },
		UpdateFunc: func(_, obj any) { r.Push(obj, false) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			r.Push(obj, true)
		},
	}
}

// dropUnused strips what lbstate never reads from informer objects, to
// save memory.
func dropUnused(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
		if a := m.GetAnnotations(); a != nil {
			delete(a, corev1.LastAppliedConfigAnnotation)
		}
	}
	switch o := obj.(type) {
	case *corev1.Node:
		o.Status.Images = nil
		o.Status.Conditions = nil
	case *corev1.Pod:
		return slimPod(o), nil
	}
	return obj, nil
}
