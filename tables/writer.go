package tables

import (
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/internal/smallset"
	"github.com/lbstate/lbstate/lb"
)

// Writer is the only way to change the load-balancing tables. Every method
// works inside the caller's write transaction (from WriteTxn, or from
// db.WriteTxn over Tables() and the caller's own tables) and leaves the
// tables consistent when it returns: the frontends it affects are
// re-derived before it returns, so later reads in the same transaction see
// them.
//
// The transaction must lock Tables(). A method returns two kinds of
// errors, and the caller must tell them apart:
//
//  1. Invalid input: errors.Is(err, ErrInvalid), and errors.As finds an
//     *InvalidError naming the object and field. The call changed
//     nothing and the rest of the transaction is good: a source rejects
//     the object (reflectors.Source.Reject), goes on and commits.
//  2. Anything else (a table write that failed, a transaction that does
//     not lock Tables() or is already done, a nested Batch): the
//     transaction may hold half of the call. Abort it and return the
//     error; a source's job then runs again and lists its world anew.
//
// For example:
//
//	if err := w.UpsertService(txn, params); errors.Is(err, tables.ErrInvalid) {
//		src.Reject(err) // logged with the object and field, counted, skipped
//	} else if err != nil {
//		return err // the caller aborts txn; the source's job retries
//	}
type Writer struct {
	db  *statedb.DB
	t   *tableSet
	log *slog.Logger

	mu           sync.Mutex
	initializers map[string]bool

	// batch is the Batch under way, if any.
	batch atomic.Pointer[batch]

	// Whether a service row with a redirect, a route or a conflict was
	// ever written (in any transaction, committed or not): until one was,
	// the indexes of them are empty, and flush need not look (a look
	// costs a few allocations, which a Writer call without a batch would
	// pay every time).
	seenRedirect, seenRoute, seenConflict atomic.Bool

	// zoneRefusedLogged is lb.ZoneNamesRefused when a refused zone was
	// last logged (noteRefusedZone).
	zoneRefusedLogged atomic.Uint64

	history *History
}

type batch struct {
	txn statedb.WriteTxn
	ch  *changes
}

// Batch runs fn, in which Writer calls with txn defer the refresh of what
// they derive (frontend rows and their backends, address ownership,
// conflicts) to the end of fn, where it is done once: a source applying
// many objects at once does each service's selection once, however many
// of its calls touch it. Inside fn, reads of the frontends table and of
// services' conflicts may be stale; when Batch returns, the tables are
// consistent, as after any Writer call.
//
// Batch returns fn's error, or the first error of the refresh, which is
// never invalid input and wins over fn's (the transaction must be
// aborted). Calls with invalid input inside fn still return their error
// and change nothing.
//
// A service row that a call inside fn wrote may be changed in place by a
// later call inside fn (its backend addresses: a service declared and
// given its backends in one batch is written once, not twice): a row read
// inside fn is what the tables hold only until the next call.
func (w *Writer) Batch(txn statedb.WriteTxn, fn func() error) error {
	b := &batch{txn: txn, ch: w.changes()}
	b.ch.batched = true
	b.ch.journal(txn)
	if !w.batch.CompareAndSwap(nil, b) {
		b.ch.release()
		return errors.New("Writer.Batch: another batch is under way")
	}
	err := func() error {
		defer w.batch.Store(nil)
		return fn()
	}()
	if ferr := w.flush(txn, b.ch); ferr != nil {
		// Not joined with err: invalid input from fn must not make an
		// internal error look like invalid input (errors.Is).
		return ferr
	}
	return err
}

// begin returns where a call records its changes: the batch's, if txn is
// in one.
func (w *Writer) begin(txn statedb.WriteTxn) *changes {
	if b := w.batch.Load(); b != nil && b.txn == txn {
		b.ch.journal(txn)
		return b.ch
	}
	ch := w.changes()
	ch.journal(txn)
	return ch
}

// end refreshes what a call changed, unless a batch will.
func (w *Writer) end(txn statedb.WriteTxn, ch *changes) error {
	if b := w.batch.Load(); b != nil && b.ch == ch {
		return ch.err
	}
	return w.flush(txn, ch)
}

// New creates the tables in db and returns their Writer. (tables.Cell
// does the same for a hive.)
func New(db *statedb.DB, log *slog.Logger) (*Writer, error) {
	t, err := newTableSet(db)
	if err != nil {
		return nil, err
	}
	return newWriter(db, t, log, DefaultHistoryConfig), nil
}

func newWriter(db *statedb.DB, t *tableSet, log *slog.Logger, hc HistoryConfig) *Writer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Writer{db: db, t: t, log: log, initializers: map[string]bool{}, history: NewHistory(hc.HistoryMaxBytes)}
	w.readCurrentRows()
	w.listSources()
	return w
}

// WriteTxn starts a write transaction over the load-balancing tables and
// any extra tables the caller wants to change in the same transaction.
func (w *Writer) WriteTxn(extra ...statedb.TableMeta) statedb.WriteTxn {
	txn := w.db.WriteTxn(slices.Concat(w.t.all(), extra)...)
	if !w.history.Enabled() {
		return txn
	}
	return &journalTxn{WriteTxn: txn, h: w.history, staged: w.history.takeSpare()}
}

// History returns the journal of frontend changes.
func (w *Writer) History() *History { return w.history }

// Tables lists the tables a write transaction must lock for the Writer.
func (w *Writer) Tables() []statedb.TableMeta { return w.t.all() }

// Services, Frontends, Backends and Node return the tables, read-only.
func (w *Writer) Services() statedb.Table[*lb.Service]   { return w.t.services }
func (w *Writer) Frontends() statedb.Table[*lb.Frontend] { return w.t.frontends }
func (w *Writer) Backends() statedb.Table[*lb.Backend]   { return w.t.backends }
func (w *Writer) Node() statedb.Table[*lb.Node]          { return w.t.node }

// NodeLabels returns the node-labels table, read-only.
func (w *Writer) NodeLabels() statedb.Table[*lb.NodeLabels] { return w.t.nodeLabels }

// FrontendsOf yields the frontends a service owns, in the order its
// declaration lists them. (There is no index of frontends by service: it
// would cost every frontend row memory and every write time, and the
// service's row already lists its addresses.)
func (w *Writer) FrontendsOf(txn statedb.ReadTxn, name lb.ServiceName) iter.Seq[*lb.Frontend] {
	return func(yield func(*lb.Frontend) bool) {
		svc, found := w.service(txn, name)
		if !found || svc.Policy() == nil {
			return
		}
		for _, params := range svc.Policy().Frontends {
			fe, _, found := w.t.frontends.Get(txn, FrontendByAddress.Query(params.Address))
			if found && fe.Service == name && !yield(fe) {
				return
			}
		}
	}
}

// RegisterInitializer registers a source that has yet to finish its
// initial sync. The tables report Initialized only after every registered
// source has called its done function (in a write transaction over
// Tables()). Register before the source starts, outside any write
// transaction on these tables; a name can be registered once.
func (w *Writer) RegisterInitializer(name string) (done func(statedb.WriteTxn), err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.initializers[name] {
		return nil, fmt.Errorf("initializer %q: already registered", name)
	}
	w.initializers[name] = true
	w.listSources()
	txn := w.WriteTxn()
	defer txn.Commit()
	dones := []func(statedb.WriteTxn){
		w.t.services.RegisterInitializer(txn, name),
		w.t.frontends.RegisterInitializer(txn, name),
		w.t.backends.RegisterInitializer(txn, name),
		w.t.node.RegisterInitializer(txn, name),
		w.t.nodeLabels.RegisterInitializer(txn, name),
		w.t.topology.RegisterInitializer(txn, name),
	}
	return func(txn statedb.WriteTxn) {
		for _, d := range dones {
			d(txn)
		}
	}, nil
}

// UpsertService sets source's declaration of a service: its frontends and
// policy. The declaration of the highest-priority source is in force.
func (w *Writer) UpsertService(txn statedb.WriteTxn, params lb.ServiceParams) error {
	if err := params.Validate(); err != nil {
		return AsInvalid(err)
	}
	fes := params.Frontends
	params.Frontends = nil // WithParams keeps a copy of its own
	params = params.Clone()
	params.Frontends = fes
	old, found := w.service(txn, params.Name)
	var next *lb.Service
	if found {
		for i := range old.Params {
			if old.Params[i].Source == params.Source && old.Params[i].Equal(&params) {
				return nil
			}
		}
		next = old.WithParams(params)
	} else {
		old, next = nil, (&lb.Service{Name: params.Name}).WithParams(params)
	}
	ch := w.begin(txn)
	w.putService(txn, ch, old, next)
	return w.end(txn, ch)
}

// DeleteService removes source's declaration of a service. Its frontends
// go with it unless another source still declares the service. Backends
// stay: they belong to their own sources.
func (w *Writer) DeleteService(txn statedb.WriteTxn, name lb.ServiceName, src lb.Source) error {
	if err := validateRef(name, src); err != nil {
		return err
	}
	old, found := w.service(txn, name)
	if !found || !declares(old, src) {
		return nil
	}
	var next *lb.Service // nil: nothing is left of the row, and no copy of it is made to say so
	if len(old.Params) > 1 || old.Overridden() {
		next = old.WithoutSource(src)
	}
	ch := w.begin(txn)
	w.putService(txn, ch, old, next)
	return w.end(txn, ch)
}

// declares reports whether src declares s (Sources, without its copy).
func declares(s *lb.Service, src lb.Source) bool {
	for i := range s.Params {
		if s.Params[i].Source == src {
			return true
		}
	}
	return false
}

// UpsertBackends adds or updates source's backends of a service. Backends
// may arrive before their service.
func (w *Writer) UpsertBackends(txn statedb.WriteTxn, name lb.ServiceName, src lb.Source, backends ...lb.BackendParams) error {
	if err := validateBackends(name, src, backends); err != nil {
		return err
	}
	ch := w.begin(txn)
	w.upsertBackends(txn, ch, name, src, backends)
	return w.end(txn, ch)
}

// SetBackends makes backends the whole set of source's backends of a
// service: those not listed are released.
func (w *Writer) SetBackends(txn statedb.WriteTxn, name lb.ServiceName, src lb.Source, backends ...lb.BackendParams) error {
	if err := validateBackends(name, src, backends); err != nil {
		return err
	}
	return w.setBackends(txn, name, src, backends, nil)
}

// SetClusterBackends makes backends the whole set of source's backends of
// a service from one cluster (BackendParams.ClusterID, which every one
// of them must carry): the cluster's backends not listed are released,
// and what the source has from other clusters stays. An importer of
// remote clusters thus keeps no list of what it wrote.
func (w *Writer) SetClusterBackends(txn statedb.WriteTxn, name lb.ServiceName, src lb.Source, clusterID uint32, backends ...lb.BackendParams) error {
	return w.SetClustersBackends(txn, name, src, ClusterBackends{ClusterID: clusterID, Backends: backends})
}

// setBackends releases src's backends of a service that ours selects
// (all when nil) and that backends does not list, and upserts backends.
func (w *Writer) setBackends(txn statedb.WriteTxn, name lb.ServiceName, src lb.Source, backends []lb.BackendParams, ours func(*lb.BackendInstance) bool) error {
	kept := smallset.NewIndex(func(b *lb.BackendParams) lb.L3n4Addr { return b.Address })
	ch := w.begin(txn)
	stale := ch.stale[:0]
	for _, addr := range w.backendAddrs(txn, name) {
		b, found := w.backendAt(txn, addr, &ch.key)
		if !found {
			continue
		}
		if inst, ok := b.Instance(name, src); ok && (ours == nil || ours(inst)) && !kept.Has(backends, b.Address) {
			stale = append(stale, b)
		}
	}
	w.releaseRows(txn, ch, name, src, stale)
	clear(stale) // no table objects kept alive in ch
	ch.stale = stale[:0]
	w.upsertBackends(txn, ch, name, src, backends)
	return w.end(txn, ch)
}

// ReleaseBackends removes source's backends of a service at the given
// addresses. A backend no source or service uses any more is deleted.
func (w *Writer) ReleaseBackends(txn statedb.WriteTxn, name lb.ServiceName, src lb.Source, addrs ...lb.L3n4Addr) error {
	if err := validateRef(name, src); err != nil {
		return err
	}
	ch := w.begin(txn)
	w.releaseBackends(txn, ch, name, src, addrs)
	return w.end(txn, ch)
}

// DeleteSource removes everything a source contributed: its declarations
// of services, its backends and the redirects, proxy redirects and routes it set. What other sources
// contributed stays.
func (w *Writer) DeleteSource(txn statedb.WriteTxn, src lb.Source) error {
	return w.deleteSourceWhere(txn, src, AllContributions, nil)
}

// SweepSource removes what src contributed to the services keep does not
// keep: their declarations, redirects and backend instances. A source
// that lists its world again after losing track of it (a run that failed
// and started over) sweeps what disappeared in between.
func (w *Writer) SweepSource(txn statedb.WriteTxn, src lb.Source, keep func(lb.ServiceName) bool) error {
	if keep == nil {
		return errors.New("sweep: keep is nil (DeleteSource removes everything)")
	}
	return w.deleteSourceWhere(txn, src, AllContributions, keep)
}

// deleteSourceWhere removes src's contributions of the kinds what names
// to every service keep does not keep (all of them when keep is nil).
func (w *Writer) deleteSourceWhere(txn statedb.WriteTxn, src lb.Source, what Contributions, keep func(lb.ServiceName) bool) error {
	if !src.Valid() {
		return Invalidf("", "source", "unknown source %s", src)
	}
	gone := func(name lb.ServiceName) bool { return keep == nil || !keep(name) }
	// A scan, not an index: a source goes away rarely, and an index by
	// source would cost every row memory and every write time.
	ch := w.begin(txn)
	var services []*lb.Service
	for s := range w.t.services.All(txn) {
		if gone(s.Name) && what.in(s, src) {
			services = append(services, s)
		}
	}
	for _, old := range services {
		w.putService(txn, ch, old, what.without(old, src))
	}
	if what&Declarations != 0 {
		w.deleteInstancesWhere(txn, ch, func(i *lb.BackendInstance) bool { return i.Source == src && gone(i.Service) })
	}
	return w.end(txn, ch)
}

// DeleteSourceCluster removes the backends src contributed for one
// cluster (BackendParams.ClusterID), to every service: a remote cluster
// that disconnects takes its backends along, and what other clusters and
// sources contributed stays. Declarations and redirects are not by
// cluster and stay too.
func (w *Writer) DeleteSourceCluster(txn statedb.WriteTxn, src lb.Source, clusterID uint32) error {
	if !src.Valid() {
		return Invalidf("", "source", "unknown source %s", src)
	}
	ch := w.begin(txn)
	w.deleteInstancesWhere(txn, ch, func(i *lb.BackendInstance) bool { return i.Source == src && i.Params.ClusterID == clusterID })
	return w.end(txn, ch)
}

// deleteInstancesWhere removes the backend instances ours selects, by a
// scan of the backends (see deleteSourceWhere).
func (w *Writer) deleteInstancesWhere(txn statedb.WriteTxn, ch *changes, ours func(*lb.BackendInstance) bool) {
	var backends []*lb.Backend
	for b := range w.t.backends.All(txn) {
		if slices.ContainsFunc(b.Instances, func(i lb.BackendInstance) bool { return ours(&i) }) {
			backends = append(backends, b)
		}
	}
	if len(backends) == 0 {
		return // the batch's cached backend rows stay true
	}
	removed := map[lb.ServiceName][]lb.L3n4Addr{}
	ch.backendEpoch++ // instances of any service
	for _, old := range backends {
		for i := range old.Instances {
			if ours(&old.Instances[i]) {
				w.backendsChanged(ch, old.Instances[i].Service)
			}
		}
		next := old.Without(ours)
		for _, name := range old.Services() {
			if _, ok := next.ForService(name); !ok {
				removed[name] = append(removed[name], old.Address)
			}
		}
		w.putBackend(txn, ch, next)
	}
	for name, addrs := range removed {
		w.changeBackendAddrs(txn, ch, name, nil, addrs)
	}
}

// SetBackendHealth records a health check's verdict on a backend address,
// without details: SetBackendVerdict with only Healthy set.
func (w *Writer) SetBackendHealth(txn statedb.WriteTxn, addr lb.L3n4Addr, healthy bool) error {
	return w.SetBackendVerdict(txn, addr, lb.HealthVerdict{Healthy: healthy})
}

// SetBackendVerdict records a health checker's verdict on a backend
// address, with since when it holds and the last error. An unhealthy
// active backend is treated as quarantined by every service. A change of
// the details alone re-selects nothing.
func (w *Writer) SetBackendVerdict(txn statedb.WriteTxn, addr lb.L3n4Addr, v lb.HealthVerdict) error {
	old, _, found := w.t.backends.Get(txn, BackendByAddress.Query(addr))
	if !found {
		return Invalidf("backend "+addr.String(), "", "not found")
	}
	if old.Verdict().Equal(v) {
		return nil
	}
	ch := w.begin(txn)
	ch.backendEpoch++ // Unhealthy of a row every service of it reads
	w.putBackend(txn, ch, old.WithVerdict(v))
	if old.Unhealthy != !v.Healthy {
		for _, name := range old.Services() {
			w.backendsChanged(ch, name)
		}
	}
	return w.end(txn, ch)
}

// SetRedirect makes the frontends of a service use the backends of
// another (r.To), until r.Source clears it. Each source has at most one
// redirect per service; the highest-priority source's is in force. A
// redirect is kept beside the service: it may come before the service is
// declared and survives every later upsert. Redirects do not chain: the
// frontends use r.To's own backends even if r.To is redirected too.
func (w *Writer) SetRedirect(txn statedb.WriteTxn, name lb.ServiceName, r lb.Redirect) error {
	if err := validateRef(name, r.Source); err != nil {
		return err
	}
	if err := r.Validate(name); err != nil {
		return AsInvalid(err)
	}
	old, found := w.service(txn, name)
	if !found {
		old = &lb.Service{Name: name}
	} else if slices.ContainsFunc(old.Redirects(), r.Equal) {
		return nil
	}
	ch := w.begin(txn)
	w.putService(txn, ch, old, old.WithRedirect(r))
	return w.end(txn, ch)
}

// ClearRedirect removes the redirect that source set on a service. The
// next source's redirect, if any, comes into force; otherwise the service
// gets its own backends back.
func (w *Writer) ClearRedirect(txn statedb.WriteTxn, name lb.ServiceName, src lb.Source) error {
	if err := validateRef(name, src); err != nil {
		return err
	}
	old, found := w.service(txn, name)
	if !found || !slices.ContainsFunc(old.Redirects(), func(r lb.Redirect) bool { return r.Source == src }) {
		return nil
	}
	ch := w.begin(txn)
	w.putService(txn, ch, old, old.WithoutRedirect(src))
	return w.end(txn, ch)
}

// SetProxyRedirect sends the new flows of a service's frontends (those
// pr.Ports names, or all) to the L7 proxy on this node at pr.ProxyPort,
// until pr.Source clears it; the backends stay selected, for the proxy.
// Each source has at most one proxy redirect per service; the
// highest-priority source's is in force. Like a redirect, it is kept
// beside the service: it may come before the service is declared,
// survives every later upsert, and applies on top of whatever backends
// the frontends have (their own, a redirect's or a route's).
func (w *Writer) SetProxyRedirect(txn statedb.WriteTxn, name lb.ServiceName, pr lb.ProxyRedirect) error {
	if err := validateRef(name, pr.Source); err != nil {
		return err
	}
	if err := pr.Validate(name); err != nil {
		return AsInvalid(err)
	}
	old, found := w.service(txn, name)
	if !found {
		old = &lb.Service{Name: name}
	} else if slices.ContainsFunc(old.ProxyRedirects(), pr.Equal) {
		return nil
	}
	pr.Ports = slices.Clone(pr.Ports)
	ch := w.begin(txn)
	w.putService(txn, ch, old, old.WithProxyRedirect(pr))
	return w.end(txn, ch)
}

// ClearProxyRedirect removes the proxy redirect that source set on a
// service. The next source's, if any, comes into force; otherwise new
// flows go to the backends again, and the maps are as before it was set.
func (w *Writer) ClearProxyRedirect(txn statedb.WriteTxn, name lb.ServiceName, src lb.Source) error {
	if err := validateRef(name, src); err != nil {
		return err
	}
	old, found := w.service(txn, name)
	if !found || !slices.ContainsFunc(old.ProxyRedirects(), func(pr lb.ProxyRedirect) bool { return pr.Source == src }) {
		return nil
	}
	ch := w.begin(txn)
	w.putService(txn, ch, old, old.WithoutProxyRedirect(src))
	return w.end(txn, ch)
}

// SetRoute sets r.Source's traffic split of a service's frontends at
// r.Port (0: every port) across the backends of other services (see
// lb.Route), in place of that source's earlier route of the port. Like a
// redirect, a route is kept beside the service: it may come before the
// service or its backend services are declared, survives every later
// upsert, and follows every change of its backend services. Routes do not
// chain: a backend service's own backends serve, even if it is routed too.
func (w *Writer) SetRoute(txn statedb.WriteTxn, name lb.ServiceName, r lb.Route) error {
	if err := validateRef(name, r.Source); err != nil {
		return err
	}
	if err := r.Validate(name); err != nil {
		return AsInvalid(err)
	}
	r.Backends = slices.Clone(r.Backends)
	old, found := w.service(txn, name)
	if !found {
		old = &lb.Service{Name: name}
	} else if slices.ContainsFunc(old.Routes(), r.Equal) {
		return nil
	}
	ch := w.begin(txn)
	w.putService(txn, ch, old, old.WithRoute(r))
	return w.end(txn, ch)
}

// ClearRoute removes the route src set on a service's port (0: the route
// of every port). The frontends it covered get the next route in force,
// or else the service's own backends back.
func (w *Writer) ClearRoute(txn statedb.WriteTxn, name lb.ServiceName, src lb.Source, port uint16) error {
	if err := validateRef(name, src); err != nil {
		return err
	}
	old, found := w.service(txn, name)
	if !found || !slices.ContainsFunc(old.Routes(), func(r lb.Route) bool { return r.Source == src && r.Port == port }) {
		return nil
	}
	ch := w.begin(txn)
	w.putService(txn, ch, old, old.WithoutRoute(src, port))
	return w.end(txn, ch)
}

// validateRef reports a service name or source that is not valid.
func validateRef(name lb.ServiceName, src lb.Source) error {
	if err := name.Validate(); err != nil {
		return AsInvalid(err)
	}
	if !src.Valid() {
		return Invalidf("service "+name.String(), "source", "unknown source %s", src)
	}
	return nil
}

func validateBackends(name lb.ServiceName, src lb.Source, backends []lb.BackendParams) error {
	if err := validateRef(name, src); err != nil {
		return err
	}
	for i := range backends {
		if err := backends[i].Validate(); err != nil {
			return &InvalidError{Object: fmt.Sprintf("service %s (%s)", name, src), Err: err}
		}
	}
	return nil
}

// service returns the row of a service. In a Batch's transaction, the
// rows the batch read or wrote are remembered: a source's calls for one
// service (its declaration, then its backends) each read the row, and so
// does the batch's flush; one lookup serves them all.
func (w *Writer) service(txn statedb.ReadTxn, name lb.ServiceName) (*lb.Service, bool) {
	b := w.batch.Load()
	if b == nil || statedb.ReadTxn(b.txn) != txn {
		return w.lookupService(txn, name)
	}
	return w.rowOf(txn, b.ch, b.ch.at(name))
}

func (w *Writer) lookupService(txn statedb.ReadTxn, name lb.ServiceName) (*lb.Service, bool) {
	s, _, found := w.t.services.Get(txn, ServiceByName.Query(name))
	return s, found
}

func (w *Writer) localNode(txn statedb.ReadTxn) (*lb.Node, bool) {
	for n := range w.t.node.All(txn) {
		return n, true
	}
	return nil, false
}

func (w *Writer) upsertBackends(txn statedb.WriteTxn, ch *changes, name lb.ServiceName, src lb.Source, backends []lb.BackendParams) {
	changed := false
	added := ch.scratchAddrs[:0] // (not in use by releaseBackends meanwhile)
	defer func() { ch.scratchAddrs = added[:0] }()
	var blank lb.Backend // a new backend's row before its first instance
	start := len(ch.wroteRows)
	for _, params := range backends {
		old, found := w.backendAt(txn, params.Address, &ch.key)
		if !found {
			blank = lb.Backend{Address: params.Address}
			old = &blank
		} else if inst, ok := old.Instance(name, src); ok && inst.Params.Equal(&params) {
			continue
		}
		if _, ok := old.ForService(name); !ok {
			added = append(added, params.Address)
		}
		row := old.WithInstance(lb.BackendInstance{Service: name, Source: src, Params: params.Clone()})
		w.putBackend(txn, ch, row)
		ch.wroteRows = append(ch.wroteRows, row)
		changed = true
	}
	ch.noteWrote(name, start)
	w.changeBackendAddrs(txn, ch, name, added, nil)
	if changed {
		w.backendsChanged(ch, name)
	}
}

func (w *Writer) releaseBackends(txn statedb.WriteTxn, ch *changes, name lb.ServiceName, src lb.Source, addrs []lb.L3n4Addr) {
	if len(addrs) > 1 { // each row once, however often addrs names it
		addrs = slices.Compact(slices.SortedFunc(slices.Values(addrs), lb.L3n4Addr.Compare))
	}
	rows := ch.stale[:0]
	for _, addr := range addrs {
		if old, found := w.backendAt(txn, addr, &ch.key); found {
			if _, ok := old.Instance(name, src); ok {
				rows = append(rows, old)
			}
		}
	}
	w.releaseRows(txn, ch, name, src, rows)
	clear(rows)
	ch.stale = rows[:0]
}

// releaseRows removes src's instance for a service from rows, the
// backend rows txn holds that have one, and deletes those left without
// instances.
func (w *Writer) releaseRows(txn statedb.WriteTxn, ch *changes, name lb.ServiceName, src lb.Source, rows []*lb.Backend) {
	removed := ch.scratchAddrs[:0]
	defer func() { ch.scratchAddrs = removed[:0] }()
	changed := false
	if len(rows) > 0 {
		ch.dropWrote(name)
	}
	for _, old := range rows {
		addr := old.Address
		changed = true
		if len(old.Instances) == 1 { // the usual case: the row goes, no copy of it is needed
			removed = append(removed, addr)
			_, _, err := w.t.backends.Delete(txn, old)
			ch.fail(err)
			continue
		}
		next := old.Without(func(i *lb.BackendInstance) bool {
			return i.Service == name && i.Source == src
		})
		if _, ok := next.ForService(name); !ok {
			removed = append(removed, addr)
		}
		w.putBackend(txn, ch, next)
	}
	if changed {
		w.backendsChanged(ch, name)
	}
	w.changeBackendAddrs(txn, ch, name, nil, removed)
}

// putBackend inserts b, or deletes it when no instance is left.
func (w *Writer) putBackend(txn statedb.WriteTxn, ch *changes, b *lb.Backend) {
	if len(b.Instances) == 0 {
		_, _, err := w.t.backends.Delete(txn, b)
		ch.fail(err)
		return
	}
	_, _, err := w.t.backends.Insert(txn, b)
	ch.fail(err)
}

// putService replaces old with next (deleting it when nothing is left of
// it) and records what the change affects. old is nil when the service
// has no row; next is nil when nothing is left of old (a deleted
// declaration: its backend addresses stay aside, as a next without a row
// would leave them).
func (w *Writer) putService(txn statedb.WriteTxn, ch *changes, old, next *lb.Service) {
	var (
		name                  lb.ServiceName
		oldPolicy, nextPolicy *lb.ServiceParams
	)
	if old != nil {
		name, oldPolicy = old.Name, old.Policy()
	}
	if next != nil {
		name, nextPolicy = next.Name, next.Policy()
	}
	rec := ch.at(name)
	for _, p := range []*lb.ServiceParams{oldPolicy, nextPolicy} {
		if p != nil {
			for _, fe := range p.Frontends {
				ch.claim(fe.Address, rec)
			}
		}
	}
	ch.refresh(name)
	ch.contend(name)
	if oldPolicy != nil && len(oldPolicy.TopologyKeys) > 0 && (nextPolicy == nil || len(nextPolicy.TopologyKeys) == 0) {
		w.trackTopology(txn, ch, name, nil, nil) // no longer reads node labels
	}
	if next == nil {
		if addrs := old.BackendAddrs(); len(addrs) > 0 {
			w.keepOrphanAddrs(txn, ch, name, addrs)
		}
	} else {
		next = w.moveBackendAddrs(txn, ch, old, next)
	}
	if next == nil || !hasRow(next) {
		if old != nil {
			_, _, err := w.t.services.Delete(txn, old)
			ch.fail(err)
			if ch.batched {
				ch.remember(name, nil)
			}
		}
		return
	}
	ch.fail(w.insertService(txn, ch, next))
}

// backendsChanged records that the backends of a service changed, which
// affects it and every service redirected to it.
// (flush finds the services redirected to it).
func (w *Writer) backendsChanged(ch *changes, name lb.ServiceName) {
	ch.refresh(name)
	ch.backendsChanged(name)
}

// anyService reports whether any service is in the index q queries (with
// an empty key): most services have no conflicts and no redirects, and
// one look at the index spares a query per service. No service is, and
// the index is not looked at, unless seen says that one was written.
func (w *Writer) anyService(txn statedb.ReadTxn, seen *atomic.Bool, q statedb.Query[*lb.Service]) bool {
	if !seen.Load() {
		return false
	}
	for range w.t.services.Prefix(txn, q) {
		return true
	}
	return false
}

// insertService inserts a service row, noting what its indexes will have
// and, in a batch, that the row is the batch's own.
func (w *Writer) insertService(txn statedb.WriteTxn, ch *changes, s *lb.Service) error {
	if ch.batched {
		ch.fresh[s] = struct{}{}
		ch.remember(s.Name, s)
	}
	if len(s.Redirects()) > 0 {
		w.seenRedirect.Store(true)
	}
	if len(s.Routes()) > 0 {
		w.seenRoute.Store(true)
	}
	if len(s.Conflicts()) > 0 {
		w.seenConflict.Store(true)
	}
	_, _, err := w.t.services.Insert(txn, s)
	return err
}
