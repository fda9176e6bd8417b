package routestatus

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/workqueue"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors/routes"
)

// Writer writes route status while it is the leader (Run), or for as
// long as Lead runs.
type Writer struct {
	cfg      Config
	db       *statedb.DB
	routes   statedb.Table[*routes.Status]
	services statedb.Table[*lb.Service]
	api      *api
	source   lb.Source
	log      *slog.Logger
	metrics  *metricSet
	limiter  *rate.Limiter
	// now is LastTransitionTime's clock, to the second as the API keeps it.
	now func() metav1.Time
}

// Params are what NewWriter takes.
type Params struct {
	Config   Config
	DB       *statedb.DB
	Routes   statedb.Table[*routes.Status]
	Services statedb.Table[*lb.Service]
	Dynamic  dynamic.Interface
	// Source is the source whose rows are the API server's routes
	// (lb.SourceK8s for reflectors/k8s).
	Source lb.Source
	Log    *slog.Logger // nil: slog.Default()
	// Registerer, if not nil, registers the writer's metrics.
	Registerer prometheus.Registerer
}

// NewWriter returns a writer; Run elects it, Lead runs it unelected.
func NewWriter(p Params) *Writer {
	if p.Log == nil {
		p.Log = slog.Default()
	}
	p.Config.RouteStatusIdentity = p.Config.identity()
	return &Writer{
		cfg: p.Config, db: p.DB, routes: p.Routes, services: p.Services, api: newAPI(p.Dynamic),
		source: p.Source, log: p.Log, metrics: newMetrics(p.Registerer),
		limiter: rate.NewLimiter(rate.Limit(p.Config.RouteStatusQPS), p.Config.RouteStatusBurst),
		now:     func() metav1.Time { return metav1.Now().Rfc3339Copy() },
	}
}

// Lead writes the status of every route, then of each route whose row or
// backend Services change, until ctx is done (nil) or it cannot watch
// the tables (the error). It returns once no write is in flight. Call it
// only while this agent is the one writer.
func (w *Writer) Lead(ctx context.Context) error {
	w.metrics.leader.Set(1)
	defer w.metrics.leader.Set(0)
	if !w.initialized(ctx) {
		return nil
	}
	t := w.prime(ctx)
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[routes.Key](100*time.Millisecond, 30*time.Second))
	stop := context.AfterFunc(ctx, q.ShutDown)
	defer stop()
	var (
		wg       sync.WaitGroup
		watchErr error
	)
	wg.Go(func() {
		if watchErr = w.watch(ctx, q); watchErr != nil {
			q.ShutDown()
		}
	})

	for {
		key, shutdown := q.Get()
		if shutdown {
			wg.Wait()
			return watchErr
		}
		err := w.sync(ctx, key, t)
		switch {
		case err == nil:
			q.Forget(key)
		case ctx.Err() != nil:
		default:
			w.log.Warn("Route status not written; retrying", "route", key.String(), "error", err)
			q.AddRateLimited(key)
		}
		q.Done(key)
	}
}

// initialized waits until every source has written its initial state
// (the services table is initialized), so that no status is written from
// half the picture (a backend Service not read yet is not missing). It
// reports false if ctx is done first.
func (w *Writer) initialized(ctx context.Context) bool {
	init, watch := w.services.Initialized(w.db.ReadTxn())
	if init {
		return true
	}
	select {
	case <-watch:
		return true
	case <-ctx.Done():
		return false
	}
}

// watch queues every route of the source, then each route whose row
// changes and each route with a backendRef to a Service that changes.
func (w *Writer) watch(ctx context.Context, q workqueue.TypedRateLimitingInterface[routes.Key]) error {
	wtxn := w.db.WriteTxn(w.routes, w.services)
	rows, err := w.routes.Changes(wtxn)
	if err != nil {
		wtxn.Abort()
		return err
	}
	defer rows.Close()
	svcs, err := w.services.Changes(wtxn)
	if err != nil {
		wtxn.Abort()
		return err
	}
	defer svcs.Close()
	wtxn.Commit()

	refs := map[lb.ServiceName]map[routes.Key]struct{}{} // backend Service: routes naming it
	named := map[routes.Key][]lb.ServiceName{}
	first := true
	for {
		txn := w.db.ReadTxn()
		changes, rowsWatch := rows.Next(txn)
		for c := range changes {
			st := c.Object
			if st.Source != w.source || !hasStatus[st.Kind] {
				continue
			}
			for _, name := range named[st.Key] {
				delete(refs[name], st.Key)
				if len(refs[name]) == 0 {
					delete(refs, name)
				}
			}
			delete(named, st.Key)
			if !c.Deleted {
				for _, ref := range st.BackendRefs {
					if refs[ref.Service] == nil {
						refs[ref.Service] = map[routes.Key]struct{}{}
					}
					refs[ref.Service][st.Key] = struct{}{}
					named[st.Key] = append(named[st.Key], ref.Service)
				}
			}
			q.Add(st.Key)
		}
		svcChanges, svcsWatch := svcs.Next(txn)
		for c := range svcChanges {
			if first {
				continue // every route is queued already
			}
			for key := range refs[c.Object.Name] {
				q.Add(key)
			}
		}
		first = false
		select {
		case <-ctx.Done():
			return nil
		case <-rowsWatch:
		case <-svcsWatch:
		}
	}
}
