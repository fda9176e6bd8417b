package kubeapi

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// ListFunc lists one resource (a typed, metadata or dynamic client's List).
type ListFunc func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error)

// WatchFunc watches one resource (a client's Watch).
type WatchFunc func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)

// ListWatch is a cache.ListerWatcher whose calls go through a
// Connection: a call the API server does not answer is tried again here
// (see Connection), and every outcome counts for the source's
// connection. An informer built on it behaves as one of client-go's
// factories otherwise.
type ListWatch struct {
	conn  *Connection
	list  ListFunc
	watch WatchFunc
	// noWatchList is whether the client cannot stream a list as a watch
	// (client-go's fake clientset), which reflectors ask before they try.
	noWatchList bool
}

var (
	_ cache.ListerWatcher            = (*ListWatch)(nil)
	_ cache.ListerWatcherWithContext = (*ListWatch)(nil)
)

// ListWatch returns a ListWatch over list and watch, which call client
// (consulted for whether it supports watch lists). It counts for the
// connection from its first call (Informers.Start counts it from the
// start: the source is not connected before its first call succeeded);
// Forget it when its informer is stopped for good.
func (c *Connection) ListWatch(client any, list ListFunc, watch WatchFunc) *ListWatch {
	return &ListWatch{conn: c, list: list, watch: watch, noWatchList: watchlist.DoesClientNotSupportWatchListSemantics(client)}
}

// ListWithContext lists, retrying while the API server does not answer.
func (lw *ListWatch) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	var out runtime.Object
	err := lw.conn.call(ctx, lw, func(ctx context.Context) (err error) {
		out, err = lw.list(ctx, opts)
		return err
	})
	return out, err
}

// WatchWithContext starts a watch, retrying while the API server does
// not answer. A watch that ends (the API server went away) is started
// again by the reflector at once, and so comes back here.
func (lw *ListWatch) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	var out watch.Interface
	err := lw.conn.call(ctx, lw, func(ctx context.Context) (err error) {
		out, err = lw.watch(ctx, opts)
		return err
	})
	return out, err
}

// List is ListWithContext without a context (cache.Lister).
func (lw *ListWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), opts)
}

// Watch is WatchWithContext without a context (cache.Watcher).
func (lw *ListWatch) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), opts)
}

// IsWatchListSemanticsUnSupported passes on what the client says, as
// client-go's own informers do.
func (lw *ListWatch) IsWatchListSemanticsUnSupported() bool { return lw.noWatchList }
