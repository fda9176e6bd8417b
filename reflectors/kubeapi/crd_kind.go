package kubeapi

import (
	"context"
	"maps"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// kindWatch is one kind's informer on one version. It stands between the
// informer and the kind's handler to remember which objects the handler
// holds, so that when the informer stops for good (the CRD went) the
// handler can be told they are gone, and when it is replaced by one on
// another version, the objects the new one does not list are.
type kindWatch struct {
	gvr     schema.GroupVersionResource
	cancel  context.CancelFunc
	release func()        // forgets the informer in the Connection
	done    chan struct{} // closed once the informer stopped: no handler call runs or is to come
	// ready is closed once the handler holds the initial list (stale
	// swept), the list is forbidden, or the informer stopped: the
	// initial sync waits for no more.
	ready     chan struct{}
	readyOnce sync.Once

	mu    sync.Mutex // held while the handler is called, so that calls and the sweep stay in order
	inner cache.ResourceEventHandler
	held  map[string]any // key: the last object the handler was given
	stale map[string]any // the previous informer's objects this one has not listed yet; nil once swept
}

// startKind starts an informer of gvr handing its objects to h. stale are
// the objects h holds from the kind's previous informer: those this one
// does not list are deleted once it has synced. Its watch errors go to
// onError; a Forbidden one also ends the wait for its initial list (its
// objects come later, as adds, once the agent may list them).
func startKind(ctx context.Context, conn *Connection, dyn dynamic.Interface, gvr schema.GroupVersionResource, h cache.ResourceEventHandler, stale map[string]any,
	onError cache.WatchErrorHandlerWithContext) (*kindWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	inf, release := dynamicInformer(conn, dyn, gvr)
	w := &kindWatch{
		gvr: gvr, cancel: cancel, release: release, done: make(chan struct{}), ready: make(chan struct{}),
		inner: h, held: map[string]any{}, stale: stale,
	}
	reg, err := inf.AddEventHandler(w)
	if err == nil {
		err = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
			if apierrors.IsForbidden(err) {
				w.markReady() // the list may come later, as adds
			}
			onError(ctx, r, err)
		})
	}
	if err != nil { // only for a started or stopped informer, which this one is not
		cancel()
		release()
		return nil, err
	}
	go w.run(ctx, inf, reg)
	return w, nil
}

func (w *kindWatch) run(ctx context.Context, inf cache.SharedIndexInformer, reg cache.ResourceEventHandlerRegistration) {
	defer close(w.done)
	defer w.release() // once the informer has stopped (the wait below)
	defer w.markReady()
	var wg sync.WaitGroup
	defer wg.Wait() // RunWithContext returns once its handler calls are over
	wg.Go(func() { inf.RunWithContext(ctx) })
	select {
	case <-reg.HasSyncedChecker().Done():
		w.sweep()
		w.markReady()
	case <-ctx.Done():
	}
}

func (w *kindWatch) markReady() { w.readyOnce.Do(func() { close(w.ready) }) }

// stop stops the informer and returns the objects the handler holds
// through it: what it was given, and what its predecessor gave and it
// has not yet confirmed or swept.
func (w *kindWatch) stop() map[string]any {
	w.cancel()
	<-w.done
	left := w.held
	for key, obj := range w.stale {
		if _, ok := left[key]; !ok {
			left[key] = obj
		}
	}
	return left
}

// sweep deletes the previous informer's objects that this one's initial
// list did not have.
func (w *kindWatch) sweep() {
	w.mu.Lock()
	defer w.mu.Unlock()
	deleteAll(w.inner, w.stale)
	w.stale = nil
}

// deleteAll tells h that objs are gone, in key order, as tombstones: their
// final state is unknown.
func deleteAll(h cache.ResourceEventHandler, objs map[string]any) {
	for _, key := range slices.Sorted(maps.Keys(objs)) {
		h.OnDelete(cache.DeletedFinalStateUnknown{Key: key, Obj: objs[key]})
	}
}

func (w *kindWatch) OnAdd(obj any, initial bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hold(obj, false)
	w.inner.OnAdd(obj, initial)
}

func (w *kindWatch) OnUpdate(old, obj any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hold(obj, false)
	w.inner.OnUpdate(old, obj)
}

func (w *kindWatch) OnDelete(obj any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hold(obj, true)
	w.inner.OnDelete(obj)
}

// hold records what the handler is about to be given; this informer has
// then decided the object, so it is no longer stale.
func (w *kindWatch) hold(obj any, deleted bool) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return // not an object; the handler reports it
	}
	delete(w.stale, key)
	if deleted {
		delete(w.held, key)
	} else {
		w.held[key] = obj
	}
}
