package kubeapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// DefaultDiscoveryInterval is how often CRDs asks discovery for its kinds
// when it may not list CRDs.
const DefaultDiscoveryInterval = 3 * time.Second

// Kind is one CRD-backed kind a source reads.
type Kind struct {
	// Name names the kind in logs ("HTTPRoute").
	Name string
	// Versions are the resources the source reads the kind from, all of
	// one group and resource, preferred first.
	Versions []schema.GroupVersionResource
	// Handler gets the kind's objects as unstructured ones, from one
	// version at a time. Its deletes may be tombstones
	// (cache.DeletedFinalStateUnknown).
	Handler cache.ResourceEventHandler
}

// crdName is the name of the kind's CRD: the API server requires it to
// be plural.group.
func (k Kind) crdName() string { return k.Versions[0].Resource + "." + k.Versions[0].Group }

// Discovery is what CRDs asks, instead of watching CRDs, when it may not
// list them (discovery.DiscoveryInterface has it).
type Discovery interface {
	ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error)
}

// CRDs runs an informer for each of its kinds while the API server serves
// the kind, on the most preferred version it serves (see the package
// doc).
type CRDs struct {
	// DiscoveryInterval is how often discovery is asked while CRDs may
	// not be listed (DefaultDiscoveryInterval). Set it before Run.
	DiscoveryInterval time.Duration
	// WatchErrorHandler, if set, gets every watch error of CRDs'
	// informers (the CRDs' and each kind's), as an informer's own
	// handler would. Without it they are logged as client-go logs them,
	// except a Forbidden one, which CRDs logs once and acts on (see
	// Run). Set it before Run.
	WatchErrorHandler cache.WatchErrorHandlerWithContext
	// Connection, if set, carries every list and watch of CRDs'
	// informers (the CRDs' and each kind's): an outage is reported and
	// each informer resumes within about a second of its end (see
	// Connection). Set it before Run.
	Connection *Connection

	dyn   dynamic.Interface
	disco Discovery
	log   *slog.Logger
	kinds []Kind

	kick       chan struct{} // a CRD changed
	forbidden  chan struct{} // closed when listing CRDs was forbidden
	forbidOnce sync.Once
	synced     chan struct{} // closed once the initial informers have synced
	first      bool          // the next apply is the first

	mu      sync.Mutex
	watches []*kindWatch // by kind; the Run goroutine changes them
}

// NewCRDs returns a CRDs of kinds over dyn, asking disco (if not nil)
// when it may not list CRDs.
func NewCRDs(dyn dynamic.Interface, disco Discovery, log *slog.Logger, kinds ...Kind) (*CRDs, error) {
	for _, k := range kinds {
		if len(k.Versions) == 0 || k.Handler == nil {
			return nil, fmt.Errorf("kind %s: no versions or no handler", k.Name)
		}
		for _, v := range k.Versions[1:] {
			if v.GroupResource() != k.Versions[0].GroupResource() {
				return nil, fmt.Errorf("kind %s: versions of %s and %s", k.Name, k.Versions[0].GroupResource(), v.GroupResource())
			}
		}
	}
	return &CRDs{
		DiscoveryInterval: DefaultDiscoveryInterval,
		dyn:               dyn, disco: disco, log: log, kinds: kinds,
		kick:      make(chan struct{}, 1),
		forbidden: make(chan struct{}),
		synced:    make(chan struct{}),
		first:     true,
		watches:   make([]*kindWatch, len(kinds)),
	}, nil
}

// HasSynced reports whether every kind whose CRD the API server served
// when CRDs first looked has its initial list handed to its handler. The
// kinds it did not serve then do not count: their objects come later, as
// adds.
func (c *CRDs) HasSynced() bool {
	select {
	case <-c.synced:
		return true
	default:
		return false
	}
}

// Watching returns the resource the named kind's informer watches, if one
// runs.
func (c *CRDs) Watching(kind string) (schema.GroupVersionResource, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, k := range c.kinds {
		if k.Name == kind && c.watches[i] != nil {
			return c.watches[i].gvr, true
		}
	}
	return schema.GroupVersionResource{}, false
}

// Run follows the CRDs until ctx is done, then stops every informer
// (leaving the handlers' objects alone: the source stops, its objects do
// not go away). Where listing CRDs is Forbidden it asks discovery every
// DiscoveryInterval instead (without a Discovery, the kinds not watched
// by then stay off). Run may be called once.
func (c *CRDs) Run(ctx context.Context) {
	defer c.stopAll()
	if c.watchCRDs(ctx) {
		return
	}
	if c.disco == nil {
		c.log.Warn("Not allowed to list CustomResourceDefinitions, and no API discovery to ask: CRD-backed kinds not watched yet stay off")
		if c.first { // nothing to wait for
			c.apply(ctx, make([]target, len(c.kinds)))
		}
		<-ctx.Done()
		return
	}
	c.log.Info("Not allowed to list CustomResourceDefinitions: asking API discovery for CRD-backed kinds instead",
		slog.Duration("every", c.DiscoveryInterval))
	c.pollDiscovery(ctx)
}

// watchCRDs applies the CRDs as an informer sees them until ctx is done
// (true) or listing them is forbidden (false).
func (c *CRDs) watchCRDs(ctx context.Context) bool {
	// The CRD informer stops when this returns; the kinds' informers,
	// started with ctx, run on (under discovery, if that is why).
	inf, release := dynamicInformer(c.Connection, c.dyn, CRDResource)
	defer release() // last: once the informer has stopped
	crdCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	if err := errors.Join(
		inf.SetTransform(slimCRD),
		inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
			if apierrors.IsForbidden(err) {
				c.forbidOnce.Do(func() { close(c.forbidden) })
			}
			c.watchError(ctx, r, err)
		}),
	); err != nil {
		c.log.Error("Watching CustomResourceDefinitions", slog.Any("error", err))
		return false
	}
	kick := func() {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { kick() },
		UpdateFunc: func(any, any) { kick() },
		DeleteFunc: func(any) { kick() },
	})
	if err != nil {
		c.log.Error("Watching CustomResourceDefinitions", slog.Any("error", err))
		return false
	}
	wg.Go(func() { inf.RunWithContext(crdCtx) })
	listed := reg.HasSyncedChecker().Done()
	for {
		select {
		case <-ctx.Done():
			return true
		case <-c.forbidden:
			return false
		case <-listed:
			listed = nil
		case <-c.kick:
			if !reg.HasSynced() {
				continue // until the initial list is in: a kind may look absent that is not
			}
		}
		want := make([]target, len(c.kinds))
		for i, k := range c.kinds {
			obj, _, _ := inf.GetStore().GetByKey(k.crdName())
			cr, _ := obj.(*crd)
			want[i].gvr, want[i].served = cr.serves(k.Versions)
			want[i].known = true
		}
		c.apply(ctx, want)
	}
}

// target is the version a kind's informer should watch.
type target struct {
	gvr    schema.GroupVersionResource
	served bool // else no informer
	known  bool // else keep the informer as it is (discovery failed)
}

// apply starts, switches and stops the kinds' informers to watch want.
func (c *CRDs) apply(ctx context.Context, want []target) {
	var (
		started []*kindWatch
		missing []string
	)
	for i, k := range c.kinds {
		t, cur := want[i], c.watches[i]
		switch {
		case !t.known:
			continue
		case cur == nil && !t.served:
			missing = append(missing, k.Name)
			continue
		case cur != nil && t.served && cur.gvr == t.gvr:
			continue
		}
		var held map[string]any
		if cur != nil {
			held = cur.stop()
		}
		if !t.served {
			c.log.Info("CRD removed or serving no version read here: its kind's objects are off until it is back",
				slog.String("kind", k.Name), slog.String("crd", k.crdName()), slog.Int("objects", len(held)))
			deleteAll(k.Handler, held)
			c.setWatch(i, nil) // after the deletes: not watched means gone
			continue
		}
		w, err := startKind(ctx, c.Connection, c.dyn, t.gvr, k.Handler, held, c.kindError(k))
		if err != nil {
			c.log.Error("Watching a CRD-backed kind", slog.String("kind", k.Name), slog.Any("error", err))
			deleteAll(k.Handler, held)
			c.setWatch(i, nil)
			continue
		}
		c.setWatch(i, w)
		started = append(started, w)
		switch {
		case cur != nil:
			c.log.Info("CRD serves other versions: watching the kind in the one preferred here",
				slog.String("kind", k.Name), slog.String("from", cur.gvr.Version), slog.String("to", t.gvr.Version))
		case !c.first:
			c.log.Info("CRD installed: watching its kind", slog.String("kind", k.Name), slog.String("crd", k.crdName()), slog.String("version", t.gvr.Version))
		}
	}
	if !c.first {
		return
	}
	c.first = false
	if len(missing) > 0 {
		c.log.Info("CRDs not installed: their kinds are off until they are", slog.String("kinds", strings.Join(missing, ",")))
	}
	go func() {
		for _, w := range started {
			<-w.ready // closed also when the informer stops
		}
		close(c.synced)
	}()
}

// kindError handles the watch errors of one of k's informers: a
// Forbidden one is logged once (the kind's objects are off, and the
// initial sync does not wait for them, until RBAC lets the agent list
// them; the informer keeps trying).
func (c *CRDs) kindError(k Kind) cache.WatchErrorHandlerWithContext {
	var once sync.Once
	return func(ctx context.Context, r *cache.Reflector, err error) {
		if apierrors.IsForbidden(err) {
			once.Do(func() {
				c.log.Warn("Not allowed to list a CRD-backed kind: its objects are off until the agent may",
					slog.String("kind", k.Name), slog.Any("error", err))
			})
		}
		c.watchError(ctx, r, err)
	}
}

// watchError passes a watch error on to WatchErrorHandler, or logs it
// as client-go would unless CRDs logged it already (Forbidden).
func (c *CRDs) watchError(ctx context.Context, r *cache.Reflector, err error) {
	switch {
	case c.WatchErrorHandler != nil:
		c.WatchErrorHandler(ctx, r, err)
	case !apierrors.IsForbidden(err):
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}
}

func (c *CRDs) setWatch(i int, w *kindWatch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watches[i] = w
}

// stopAll stops every informer, leaving what their handlers hold.
func (c *CRDs) stopAll() {
	for i, w := range c.watches {
		if w != nil {
			w.cancel()
			<-w.done
			c.setWatch(i, nil)
		}
	}
}
