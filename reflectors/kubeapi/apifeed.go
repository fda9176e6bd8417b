package kubeapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/lbstate/lbstate/lb"
)

// APIFeed is the Feed of an API server, with the identity lb.SourceK8s.
// Each built-in kind is watched by one informer, started at the first
// subscription that asks for it and shared by every later one (a
// subscriber that starts over is handed the informer's objects again,
// without a new list); the CRD-backed kinds wanted are watched by one
// CRDs, each while its CRD is served. Every list and watch goes through
// one Connection, which tells every subscriber whether the API server is
// reached.
type APIFeed struct {
	// DiscoveryInterval is how often API discovery is asked for the
	// CRD-backed kinds when CRDs may not be listed
	// (DefaultDiscoveryInterval). Set it before the first Subscribe.
	DiscoveryInterval time.Duration

	clients Clients
	log     *slog.Logger
	report  *reporters
	conn    *Connection

	ctx    context.Context // the feed's lifetime: Stop cancels it
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	factories *factories
	informers map[string]cache.SharedIndexInformer // by FeedKind.key
	crdKinds  []FeedKind                           // wanted
	crdFanout *Fanout                              // nil until the CRDs run
}

// NewAPIFeed returns the feed of the API server of c (c.Dynamic, if set,
// serves the CRD-backed kinds; c.Metadata, if set, every Node's labels).
// Stop it when done.
func NewAPIFeed(c Clients, log *slog.Logger) *APIFeed {
	ctx, cancel := context.WithCancel(context.Background())
	report := &reporters{members: map[Reporter]int{}}
	conn := NewConnection(report)
	return &APIFeed{
		DiscoveryInterval: DefaultDiscoveryInterval,
		clients:           c, log: log, report: report, conn: conn,
		ctx: ctx, cancel: cancel,
		factories: newFactories(conn, c),
		informers: map[string]cache.SharedIndexInformer{},
	}
}

// Source is lb.SourceK8s.
func (f *APIFeed) Source() lb.Source { return lb.SourceK8s }

// AllowsLoopback is false: the API server rejects loopback endpoints.
func (f *APIFeed) AllowsLoopback() bool { return false }

// Want records the CRD-backed kinds among kinds: the CRDs watch, made at
// the first subscription that asks for one, covers every kind wanted by
// then.
func (f *APIFeed) Want(kinds ...FeedKind) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range kinds {
		if k.IsCRD() && !f.wantsLocked(k) {
			f.crdKinds = append(f.crdKinds, k)
		}
	}
}

func (f *APIFeed) wantsLocked(k FeedKind) bool {
	for _, w := range f.crdKinds {
		if w.key == k.key {
			return true
		}
	}
	return false
}

// Stop stops every informer and waits for them.
func (f *APIFeed) Stop() {
	f.cancel()
	f.wg.Wait()
	f.factories.shutdown()
}

// Subscribe implements Feed.
func (f *APIFeed) Subscribe(ctx context.Context, s Subscription) error {
	if f.ctx.Err() != nil {
		return errors.New("API feed: stopped")
	}
	if s.Connection != nil {
		f.report.add(s.Connection)
		defer f.report.remove(s.Connection)
	}
	var synced []cache.InformerSynced
	var crdKinds []FeedKind
	for _, k := range s.Kinds {
		if k.IsCRD() {
			crdKinds = append(crdKinds, k)
			continue
		}
		h := handlerOf(s.Events)
		if k.only != nil {
			h = cache.FilteringResourceEventHandler{FilterFunc: unwrapped(k.only), Handler: h}
		}
		inf := f.informer(k)
		reg, err := inf.AddEventHandler(h)
		if err != nil {
			return fmt.Errorf("API feed: %s: %w", k.Kind, err)
		}
		defer inf.RemoveEventHandler(reg) //nolint:errcheck // fails only once the informer stopped
		synced = append(synced, reg.HasSynced)
	}
	f.factories.start(f.ctx.Done())
	if len(crdKinds) > 0 {
		fan, err := f.startCRDs(crdKinds)
		if err != nil {
			return err
		}
		crdSynced := make(chan struct{})
		cancel := fan.subscribe(Subscription{Kinds: crdKinds, Invalid: s.Invalid,
			Events: syncedBy{s.Events, sync.OnceFunc(func() { close(crdSynced) })}})
		defer cancel()
		synced = append(synced, func() bool {
			select {
			case <-crdSynced:
				return true
			default:
				return false
			}
		})
	}
	if cache.WaitForCacheSync(ctx.Done(), synced...) {
		s.Events.Synced()
	}
	<-ctx.Done()
	return nil
}

// informer returns the informer of a built-in kind, made at the first
// call.
func (f *APIFeed) informer(k FeedKind) cache.SharedIndexInformer {
	f.mu.Lock()
	defer f.mu.Unlock()
	inf, ok := f.informers[k.key]
	if !ok {
		inf = k.informer(f.factories)
		f.informers[k.key] = inf
	}
	return inf
}

// startCRDs starts the CRDs watch of every CRD-backed kind wanted (and
// kinds), once, and returns the Fanout it feeds.
func (f *APIFeed) startCRDs(kinds []FeedKind) (*Fanout, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.crdFanout != nil {
		for _, k := range kinds {
			if !f.wantsLocked(k) {
				return nil, fmt.Errorf("API feed: kind %s was not wanted before the feed started watching CRDs", k.Kind)
			}
		}
		return f.crdFanout, nil
	}
	for _, k := range kinds {
		if !f.wantsLocked(k) {
			f.crdKinds = append(f.crdKinds, k)
		}
	}
	if f.clients.Dynamic == nil {
		// No dynamic client: the kinds have no objects, at once.
		fan := NewFanout()
		fan.MarkSynced()
		f.crdFanout = fan
		return fan, nil
	}
	fan := NewFanout()
	var crdKinds []Kind
	for _, k := range f.crdKinds {
		crdKinds = append(crdKinds, Kind{Name: k.Kind, Versions: k.versions, Handler: crdHandler(fan, k)})
	}
	crds, err := NewCRDs(f.clients.Dynamic, f.clients.Client.Discovery(), f.log, crdKinds...)
	if err != nil {
		return nil, err
	}
	crds.DiscoveryInterval = f.DiscoveryInterval
	crds.Connection = f.conn
	f.crdFanout = fan
	f.wg.Go(func() { crds.Run(f.ctx) })
	f.wg.Go(func() {
		if cache.WaitForCacheSync(f.ctx.Done(), crds.HasSynced) {
			fan.MarkSynced()
		}
	})
	return fan, nil
}

// crdHandler hands a CRD-backed kind's objects, converted, to fan. One
// that does not convert is reported, and its last good version stays.
func crdHandler(fan *Fanout, k FeedKind) cache.ResourceEventHandler {
	push := func(obj any, deleted bool) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		key := u.GetNamespace() + "/" + u.GetName()
		o, err := k.convert(u, deleted)
		if err != nil {
			fan.Invalid(k.Kind, err)
			return
		}
		if deleted {
			fan.Delete(k.Kind, key, o)
		} else {
			fan.Set(k.Kind, key, o)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { push(obj, false) },
		UpdateFunc: func(_, obj any) { push(obj, false) },
		DeleteFunc: func(obj any) { push(obj, true) },
	}
}

// handlerOf pushes an informer's notifications to ev.
func handlerOf(ev Events) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { ev.Push(obj, false) },
		UpdateFunc: func(_, obj any) { ev.Push(obj, false) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			ev.Push(obj, true)
		},
	}
}

// unwrapped applies only to a deleted object's last state known.
func unwrapped(only func(obj any) bool) func(obj any) bool {
	return func(obj any) bool {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		return only(obj)
	}
}

// syncedBy passes objects on to Events and calls synced in place of its
// Synced.
type syncedBy struct {
	Events
	synced func()
}

func (s syncedBy) Synced() { s.synced() }

// reporters tell every subscriber of a feed what its Connection says;
// one that subscribes later is told the latest at once.
type reporters struct {
	mu      sync.Mutex
	members map[Reporter]int // subscriptions of each
	known   bool             // something was reported
	ok      bool
	err     error
}

func (r *reporters) add(m Reporter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.members[m]++
	switch {
	case !r.known:
	case r.ok:
		m.Connected()
	default:
		m.Disconnected(r.err)
	}
}

func (r *reporters) remove(m Reporter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.members[m]--; r.members[m] <= 0 {
		delete(r.members, m)
	}
}

func (r *reporters) Connected() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.known, r.ok, r.err = true, true, nil
	for m := range r.members {
		m.Connected()
	}
}

func (r *reporters) Disconnected(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.known, r.ok, r.err = true, false, err
	for m := range r.members {
		m.Disconnected(err)
	}
}
