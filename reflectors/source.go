// Package reflectors holds what every source of load-balancing state has
// in common; each source is a package below it (k8s, redirectpolicy,
// routes, clustermesh, health), and none imports another: they meet in
// the tables. Sources of Kubernetes kinds read them from feeds
// (reflectors/kubeapi: the API server; reflectors/file: a manifests
// directory).
//
// A source is a hive cell with the same parts: it registers its
// initializer with the Writer before the hive starts, runs as a supervised
// job that reports its health, applies changes through the Writer in
// batches, marks itself synced after its initial state is written (the
// reconciler prunes nothing until every source has), logs and counts bad
// input per object, and exports its counters in the hive's Prometheus
// registry. Register gives a source all of that:
//
//	var static = lb.MustRegisterSource("static", 450) // name, priority
//
//	cell.Invoke(func(p reflectors.Params) error {
//		return reflectors.Register(p, static, run) // run(ctx, *Source) error
//	})
//
// A source has one identity, an lb.Source registered once with its name
// and priority: the rows it writes carry it (s.ID()), the one with the
// higher priority owns what several declare, and its name labels its
// initializer, logs, metrics and job. An embedder registers as many as
// it has, each with its own priority among the built-in ones (api 500,
// file 400, k8s 300, kvstore 200, redirect 100).
//
// A source that follows a world it can lose (an API server, an etcd)
// also says whether it reaches it: Disconnected(err) and Connected make
// lbstate_source_connected{source} 0 or 1 and the health degraded with
// the error or OK, and log one WARN line when an outage starts and one
// INFO line with its duration when it ends, however often the source
// retries in between (reflectors/kubeapi does it for informers).
//
// A source tells the Writer's two error kinds apart (see tables.Writer):
// invalid input (errors.Is(err, tables.ErrInvalid)) goes to Reject, and
// the rest of the transaction is committed; any other error aborts the
// transaction and is returned from the body, which Register runs again
// with backoff.
// ExpectSyncWithin degrades a source that has not synced by a deadline
// ("Not synced after 2m0s: <last error>") while it keeps trying.
package reflectors

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/metrics"
	"github.com/lbstate/lbstate/tables"
)

// Params are what Register takes from the hive.
type Params struct {
	cell.In

	Writer *tables.Writer
	Jobs   job.Registry
	Health cell.Health
	Log    *slog.Logger
	// Registerer is the hive's registry (metrics.Cell), if it has one.
	Registerer prometheus.Registerer `optional:"true"`
}

// RunFunc is a source's body: it writes its initial state, calls
// s.Synced once that is committed, then follows changes until ctx is
// done. An error is logged, reported as degraded health and the body run
// again with backoff (from retryMin, doubling up to retryMax): a body
// that can fail after writing must, when run again, remove what it
// declared before and no longer sees (k8s.Reflector does, at its synced
// marker).
type RunFunc func(ctx context.Context, s *Source) error

const (
	retryMin = time.Second
	retryMax = time.Minute
)

// Register adds the source src (registered with lb.RegisterSource; its
// name is its initializer, metrics label and job name) that runs run in
// a supervised job for the hive's lifetime. Call it from a cell.Invoke,
// before the hive starts.
func Register(p Params, src lb.Source, run RunFunc) error {
	return RegisterAs(p, src.String(), src, run)
}

// RegisterAs is Register for one of several sources that write as one
// identity: each is named on its own (initializer, metrics label, job),
// such as "k8s-routes" beside "k8s", and each removes only its own kind
// of rows (tables.SweepSourceOf). The sources of one Kubernetes feed
// share its identity this way.
func RegisterAs(p Params, name string, src lb.Source, run RunFunc) error {
	s, err := NewSourceAs(p.Writer, name, src, p.Log, p.Registerer)
	if err != nil {
		return err
	}
	g := p.Jobs.NewGroup(p.Health, job.WithLogger(p.Log))
	// The job logs a failure and reports it as degraded health.
	g.Add(job.OneShot(name, func(ctx context.Context, h cell.Health) error {
		s.setHealth(h)
		return run(ctx, s)
	}, job.WithRetry(-1, &job.ExponentialBackoff{Min: retryMin, Max: retryMax})))
	return nil
}

// Source is one source's handle on what all sources share: the Writer,
// its initializer, logging and counting bad input, its object counts and
// its health.
type Source struct {
	// Writer is the one way to change the tables.
	Writer *tables.Writer
	id     lb.Source
	name   string
	log    *slog.Logger
	done   func(statedb.WriteTxn)

	mu     sync.Mutex
	health cell.Health    // nil until the job runs (and in tests)
	counts map[string]int // SetObjects' last counts, for the synced log line
	synced atomic.Bool
	conn   connState // guarded by mu (connected.go)

	rep          *Reporter // bad input: Reject, Errors
	unknownTotal prometheus.Counter
	objects      *prometheus.GaugeVec
	syncedGauge  prometheus.Gauge
	connected    *prometheus.GaugeVec // its series appears at the first report
}

// NewSource registers src's initializer (its name) with w and returns
// its handle, with metrics registered in reg (nil: unregistered).
// Register calls it; tests and sources driven by hand may call it
// directly. src must be registered (lb.RegisterSource).
func NewSource(w *tables.Writer, src lb.Source, log *slog.Logger, reg prometheus.Registerer) (*Source, error) {
	return NewSourceAs(w, src.String(), src, log, reg)
}

// NewSourceAs is NewSource for a source named name that writes as src
// (see RegisterAs).
func NewSourceAs(w *tables.Writer, name string, src lb.Source, log *slog.Logger, reg prometheus.Registerer) (*Source, error) {
	if !src.Valid() {
		return nil, fmt.Errorf("source %s: not registered (lb.RegisterSource)", src)
	}
	done, err := w.RegisterInitializer(name)
	if err != nil {
		return nil, err
	}
	m := sourceMetrics(reg)
	rep := &Reporter{log: log.With("source", name), errorsTotal: m.errors.WithLabelValues(name)}
	return &Source{
		Writer:       w,
		id:           src,
		name:         name,
		log:          rep.log,
		done:         done,
		rep:          rep,
		unknownTotal: m.unknown.WithLabelValues(name),
		objects:      m.objects.MustCurryWith(prometheus.Labels{"source": name}),
		syncedGauge:  m.synced.WithLabelValues(name),
		connected:    m.connected,
	}, nil
}

// ID is the source's identity: the rows it writes carry it (as
// lb.ServiceParams.Source, the source of Writer.UpsertBackends and the
// like), so that it owns exactly what it wrote.
func (s *Source) ID() lb.Source { return s.id }

// Name is the source's name (s.ID().String(), unless RegisterAs named it).
func (s *Source) Name() string { return s.name }

// Log is the source's logger (it carries source=NAME).
func (s *Source) Log() *slog.Logger { return s.log }

// Synced marks the source's initial state as written: once every source
// has, the tables are initialized and the reconciler may prune. Call it
// after committing that state, never while holding a write transaction
// on the tables (it takes one). Later calls do nothing.
func (s *Source) Synced() {
	if s.synced.Swap(true) {
		return
	}
	txn := s.Writer.WriteTxn()
	s.done(txn)
	txn.Commit()
	s.syncedGauge.Set(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	attrs := make([]any, 0, 2*len(s.counts))
	for _, kind := range slices.Sorted(maps.Keys(s.counts)) {
		attrs = append(attrs, kind, s.counts[kind])
	}
	s.log.Info("Source synced", attrs...)
	s.reportHealthLocked()
}

// IsSynced reports whether Synced was called.
func (s *Source) IsSynced() bool { return s.synced.Load() }

// Reject logs (at WARN) and counts one piece of invalid input, and
// reports true: err names the object and field, and is
// errors.Is(err, tables.ErrInvalid) (a Writer error of that kind, or
// the source's own, made with tables.Invalidf or tables.AsInvalid). The
// source skips the object and goes on with everything else.
//
// Any other error is not the input's fault, and the transaction it came
// from may hold half a change: the source must abort it and return the
// error, so that its job runs again. Reject given such an error is a bug
// of the source: it logs it at ERROR, counts nothing and reports false.
// nil reports false too.
func (s *Source) Reject(err error) bool { return s.rep.Reject(err) }

// Unknown logs (at INFO) and counts a value of an evolving field that
// this version does not know, for which the source used the field's
// default: object and field name where it is, def what was used. It is
// not an error: the object is kept. A source calls it once per object
// until the object's unknown values change.
func (s *Source) Unknown(object, field, value, def string) {
	s.unknownTotal.Inc()
	s.log.Info("Unknown value of an evolving field, using its default",
		"object", object, "field", field, "value", value, "default", def)
}

// Errors returns how many times Reject was called.
func (s *Source) Errors() uint64 { return s.rep.Errors() }

// SetObjects records how many objects of a kind the source holds.
func (s *Source) SetObjects(kind string, n int) {
	s.objects.WithLabelValues(kind).Set(float64(n))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counts == nil {
		s.counts = map[string]int{}
	}
	s.counts[kind] = n
}

func (s *Source) setHealth(h cell.Health) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.health = h
	s.reportHealthLocked()
}

// metricFamilies are shared by every source of a registry, labelled by
// source.
type metricFamilies struct {
	errors    *prometheus.CounterVec
	unknown   *prometheus.CounterVec
	objects   *prometheus.GaugeVec
	synced    *prometheus.GaugeVec
	connected *prometheus.GaugeVec
}

func sourceMetrics(reg prometheus.Registerer) metricFamilies {
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: metrics.Namespace, Subsystem: "source", Name: name, Help: help}
	}
	return metricFamilies{
		errors: metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts(opts("errors_total",
			"Objects (or parts of objects) a source rejected as invalid")), []string{"source"})),
		unknown: metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts(opts("unknown_values_total",
			"Values of evolving fields a source did not know and replaced by the field's default")), []string{"source"})),
		objects: metrics.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts(opts("objects",
			"Objects a source holds, by kind")), []string{"source", "kind"})),
		synced: metrics.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts(opts("synced",
			"1 once a source's initial state is written")), []string{"source"})),
		connected: metrics.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts(opts("connected",
			"1 while a source reaches its world (every watch of a Kubernetes source established, every remote cluster's etcd watch of the clustermesh), 0 while it does not; absent for sources that never say")), []string{"source"})),
	}
}
