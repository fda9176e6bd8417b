package kubeapi

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
)

// Informers is a factory of shared informers, one per resource, each on
// a ListWatch of one Connection; it starts and stops them as client-go's
// factories do. Typed informers come from Informer; MetadataInformers
// also serves ForResource (as client-go's metadata factory, whose
// interface it implements).
type Informers struct {
	conn      *Connection
	client    any // asked whether it supports watch lists
	transform cache.TransformFunc
	// byResource builds ForResource's list and watch (nil: Informer only),
	// of objects like obj.
	byResource func(gvr schema.GroupVersionResource) (ListFunc, WatchFunc)
	obj        runtime.Object

	mu        sync.Mutex
	informers map[schema.GroupVersionResource]*informer
	stopped   bool
	wg        sync.WaitGroup
}

type informer struct {
	inf     cache.SharedIndexInformer
	lw      *ListWatch
	gvr     schema.GroupVersionResource
	started bool
}

var _ metadatainformer.SharedInformerFactory = (*Informers)(nil)

// NewInformers returns a factory of informers over client, each storing
// objects through transform (nil: as they come).
func NewInformers(conn *Connection, client any, transform cache.TransformFunc) *Informers {
	return &Informers{conn: conn, client: client, transform: transform, informers: map[schema.GroupVersionResource]*informer{}}
}

// MetadataInformers returns a factory of informers of objects' metadata
// (PartialObjectMetadata), listed and watched through client.
func MetadataInformers(conn *Connection, client metadata.Interface, transform cache.TransformFunc) *Informers {
	f := NewInformers(conn, client, transform)
	f.obj = &metav1.PartialObjectMetadata{}
	f.byResource = func(gvr schema.GroupVersionResource) (ListFunc, WatchFunc) {
		res := client.Resource(gvr)
		return func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) { return res.List(ctx, opts) },
			res.Watch
	}
	return f
}

// Informer returns the factory's informer of gvr, made at the first call
// from list and watch, storing objects like obj.
func (f *Informers) Informer(gvr schema.GroupVersionResource, obj runtime.Object, list ListFunc, watch WatchFunc) cache.SharedIndexInformer {
	f.mu.Lock()
	defer f.mu.Unlock()
	if i, ok := f.informers[gvr]; ok {
		return i.inf
	}
	lw := f.conn.ListWatch(f.client, list, watch)
	inf := cache.NewSharedIndexInformerWithOptions(lw, obj, cache.SharedIndexInformerOptions{
		Indexers:          cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		ObjectDescription: gvr.String(),
	})
	if f.transform != nil {
		_ = inf.SetTransform(f.transform) // cannot fail before the informer starts
	}
	f.informers[gvr] = &informer{inf: inf, lw: lw, gvr: gvr}
	return inf
}

// ForResource returns the informer of gvr (MetadataInformers only; it
// panics on a factory of NewInformers).
func (f *Informers) ForResource(gvr schema.GroupVersionResource) informers.GenericInformer {
	list, watch := f.byResource(gvr)
	inf := f.Informer(gvr, f.obj, list, watch)
	return genericInformer{inf, gvr.GroupResource()}
}

type genericInformer struct {
	inf cache.SharedIndexInformer
	gr  schema.GroupResource
}

func (g genericInformer) Informer() cache.SharedIndexInformer { return g.inf }
func (g genericInformer) Lister() cache.GenericLister {
	return cache.NewGenericLister(g.inf.GetIndexer(), g.gr)
}

// Start runs every informer not yet started until stop closes.
func (f *Informers) Start(stop <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return
	}
	for _, i := range f.informers {
		if !i.started {
			i.started = true
			f.conn.join(i.lw)
			f.wg.Go(func() { i.inf.Run(stop) })
		}
	}
}

// WaitForCacheSync waits until every started informer's store is filled,
// or stop closes, and says which were.
func (f *Informers) WaitForCacheSync(stop <-chan struct{}) map[schema.GroupVersionResource]bool {
	f.mu.Lock()
	var started []*informer
	for _, i := range f.informers {
		if i.started {
			started = append(started, i)
		}
	}
	f.mu.Unlock()
	out := make(map[schema.GroupVersionResource]bool, len(started))
	for _, i := range started {
		out[i.gvr] = cache.WaitForCacheSync(stop, i.inf.HasSynced)
	}
	return out
}

// Shutdown waits for the informers to return (stop them first by closing
// Start's channel) and forgets them in the Connection: a factory shut
// down keeps no source disconnected. Start does nothing after it.
func (f *Informers) Shutdown() {
	f.mu.Lock()
	f.stopped = true
	f.mu.Unlock()
	f.wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, i := range f.informers {
		f.conn.Forget(i.lw)
	}
}

// dynamicInformer returns an informer of gvr's unstructured objects over
// dyn, on a ListWatch of conn (nil: client-go's dynamic informer, with
// its backoff), counted from now, and the func that forgets its
// ListWatch, to call once the informer has stopped. CRDs' informers are
// made here: they come and go with their CRDs.
func dynamicInformer(conn *Connection, dyn dynamic.Interface, gvr schema.GroupVersionResource) (cache.SharedIndexInformer, func()) {
	if conn == nil {
		return dynamicinformer.NewFilteredDynamicInformer(dyn, gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer(), func() {}
	}
	res := dyn.Resource(gvr)
	lw := conn.ListWatch(dyn, func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) { return res.List(ctx, opts) }, res.Watch)
	conn.join(lw)
	inf := cache.NewSharedIndexInformerWithOptions(lw, &unstructured.Unstructured{}, cache.SharedIndexInformerOptions{ObjectDescription: gvr.String()})
	return inf, func() { conn.Forget(lw) }
}
