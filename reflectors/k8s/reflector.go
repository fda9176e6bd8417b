package k8s

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbstate/lbstate/internal/smallset"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/reflectors/kubeapi"
	"github.com/lbstate/lbstate/tables"
)

// event is one informer notification, or the marker that the initial
// lists are all in.
type event struct {
	obj     any
	deleted bool
	synced  bool
}

// Reflector feeds the tables from Kubernetes objects: Services,
// EndpointSlices, the local Node and its Pods, converted with
// ConvertService, ConvertEndpointSlice and ConvertPod and applied through
// the Writer in batches. Run applies what a feed pushes (Subscribe: any
// kubeapi.Feed; WatchAPI: an API feed of its own); a benchmark or a test
// may call Push and Synced itself.
type Reflector struct {
	cfg       Config
	nodePorts PortRange // cfg.K8sNodePortRange
	src       *reflectors.Source
	w         *tables.Writer
	as        lb.Source
	events    chan event
	spare     chan writes // batches' buffers for later batches (giveBack)
	// stopped closes (once, with stop) when Run's loop has returned, so
	// that nothing waits forever to hand it an event.
	stopped chan struct{}
	stop    func()

	// failed is the first write that failed other than by invalid input
	// (see write); cancel ends Run's loop then (nil outside Run).
	failMu sync.Mutex
	failed error
	cancel context.CancelFunc
	// writeErr is the first such error of the batch being written
	// (owned by the goroutine that writes).
	writeErr error

	// Owned by the loop.
	// services holds each service that has a Service or slices, by its
	// name's text: a 16-byte key (the entry holds the name itself) where an
	// lb.ServiceName takes 24, for a 64-byte map slot instead of 72.
	services map[string]serviceEntry
	// causes is what the history's causes are carved from (newCause):
	// the history keeps them and lets the oldest go first, so the
	// causes of a block go together.
	causes    []tables.Cause
	batch     batchState // what the batch being prepared changed
	nServices int        // entries with a Service
	// slices holds the service of each slice that is not the service
	// its name says (sliceOwner): nearly none.
	slices     map[sliceKey]lb.ServiceName
	nSlices    int
	pods       map[sliceKey]*corev1.Pod // this node's pods, by namespace and name
	node       *corev1.Node
	loopbackOK bool // AcceptLoopbackEndpoints
	// nodeSet is whether the local node was declared: at the first Node
	// event, or at the first batch when the zone is overridden.
	nodeSet bool
	// unknown holds the unknown values last logged for each service.
	unknown map[lb.ServiceName][]UnknownValue
	// topologyNoted holds what was last logged about each service's
	// topology keys (topologyKeys).
	topologyNoted map[lb.ServiceName]string

	// servicesPeak is the most services since services was made
	// (compactServices).
	servicesPeak int
}

// sliceKey names a namespaced object (an EndpointSlice or a Pod).
type sliceKey struct{ namespace, name string }

// NewReflector returns a reflector that declares what it is fed as the
// source as, through src's Writer, and reports synced, bad input and
// object counts through src.
func NewReflector(cfg Config, src *reflectors.Source, as lb.Source) (*Reflector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !as.Valid() {
		return nil, fmt.Errorf("reflector: unknown source %d", as)
	}
	nodePorts, _ := ParsePortRange(cfg.K8sNodePortRange) // validated above
	stopped := make(chan struct{})
	return &Reflector{
		cfg: cfg, nodePorts: nodePorts, src: src, w: src.Writer, as: as,
		events:   make(chan event, 4096),
		spare:    make(chan writes, spareWrites),
		stopped:  stopped,
		stop:     sync.OnceFunc(func() { close(stopped) }),
		services: map[string]serviceEntry{},
		batch:    batchState{index: map[lb.ServiceName]int{}},
		slices:   map[sliceKey]lb.ServiceName{},
		pods:     map[sliceKey]*corev1.Pod{},
		unknown:  map[lb.ServiceName][]UnknownValue{},
	}, nil
}

// Push hands the reflector one object that was added or changed (deleted
// false) or removed (deleted true). It waits for room in the queue, but
// not once Run has returned. Call it while Run runs (from its feed, or
// from anywhere once the feed has started).
func (r *Reflector) Push(obj any, deleted bool) { r.send(event{obj: obj, deleted: deleted}) }

// Synced tells the reflector that every object of the initial state has
// been pushed; once they are applied, its source counts as synced.
func (r *Reflector) Synced() { r.send(event{synced: true}) }

func (r *Reflector) send(ev event) {
	select {
	case r.events <- ev:
	case <-r.stopped:
	}
}

// Run calls feed in its own goroutine and applies what it pushes until
// ctx is done or feed fails, then waits for feed to return. A feed that
// returns nil early (it pushed a fixed set) leaves Run applying until ctx
// is done. A write that fails other than by invalid input ends Run with
// its error, nothing of its batch committed: the reflector no longer
// knows what the tables hold, and the source's job starts over with a new
// one, which lists everything again and sweeps at its synced marker.
// Run may be called once.
func (r *Reflector) Run(ctx context.Context, feed func(ctx context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.failMu.Lock()
	r.cancel = cancel
	r.failMu.Unlock()
	var feedErr error
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		if feedErr = feed(ctx); feedErr != nil {
			cancel()
		}
	}()
	r.loop(ctx)
	<-fed
	if err := r.failure(); err != nil {
		return err
	}
	return feedErr
}

// loop applies events in batches of at most cfg.K8sBatchSize (eventSize).
//
// It runs in two stages: this goroutine keeps the objects and converts
// them into Writer calls, and a second one applies each batch's calls in
// a write transaction, so converting the next batch overlaps with writing
// this one. Batches are written in order.
//
// Batching costs nothing when there is nothing to batch: a batch goes to
// the writer as soon as no event is queued, unless the writer already
// has one batch in hand and another waiting; then it keeps gathering
// events until the writer takes one, for at most cfg.K8sBatchDelay. A
// lone change is applied at once (by this goroutine itself when the
// writer is idle); under load, batches grow with the time the writer
// takes.
func (r *Reflector) loop(ctx context.Context) {
	defer r.stop()
	writes := make(chan writes, 1)
	// done gets one token per batch written. At most three batches are in
	// flight (one being written, one queued, one being handed over), so
	// the writer never waits to say so.
	done := make(chan struct{}, 3)
	written := make(chan struct{})
	go func() {
		defer close(written)
		for ws := range writes {
			r.writeOrStop(ws)
			done <- struct{}{}
		}
	}()
	defer func() {
		close(writes)
		<-written
	}()
	batch := make([]event, 0, r.cfg.K8sBatchSize)
	inFlight := 0 // batches handed to the writer and not yet written
	deadline := time.NewTimer(r.cfg.K8sBatchDelay)
	deadline.Stop()
	for {
		batch, size := batch[:0], 0
		add := func(ev event) {
			batch = append(batch, ev)
			size += eventSize(ev)
		}
		for len(batch) == 0 {
			select {
			case <-ctx.Done():
				return
			case <-done:
				inFlight--
			case ev := <-r.events:
				add(ev)
			}
		}
		deadline.Reset(r.cfg.K8sBatchDelay)
	fill:
		for size < r.cfg.K8sBatchSize {
			select {
			case ev := <-r.events:
				add(ev)
				continue
			case <-done:
				inFlight--
				continue
			default:
			}
			if inFlight < 2 {
				break // the writer would wait for this batch
			}
			select {
			case ev := <-r.events:
				add(ev)
			case <-done:
				inFlight--
			case <-deadline.C:
				break fill
			}
		}
		deadline.Stop()
		if inFlight == 0 && len(r.events) == 0 {
			// A lone change and an idle writer: write it here, one
			// goroutine hand-over fewer. (With more events queued, the
			// writer takes it, so that converting them overlaps.)
			r.apply(batch)
			continue
		}
		inFlight++
		writes <- r.prepare(batch) // the writer never stops before the loop
	}
}

// eventSize is what an event weighs against cfg.K8sBatchSize: an
// EndpointSlice as many as the backends it gives or takes away (its write
// is that much longer), anything else one. A batch of large slices thus
// holds the tables' write lock no longer than one of small ones, and the
// reconciler, which needs it to write back statuses, waits no longer.
func eventSize(ev event) int {
	if es, ok := ev.obj.(*discoveryv1.EndpointSlice); ok {
		return max(sliceBackends(es), 1)
	}
	return 1
}

// apply records and writes one batch (the two stages of loop, in one
// goroutine).
func (r *Reflector) apply(batch []event) { r.writeOrStop(r.prepare(batch)) }

// writeOrStop writes one batch, unless an earlier one failed (this one
// builds on it), and stops Run at the first that fails.
func (r *Reflector) writeOrStop(ws writes) {
	if r.failure() != nil {
		return
	}
	err := r.write(ws)
	r.giveBack(ws)
	if err != nil {
		r.failMu.Lock()
		defer r.failMu.Unlock()
		r.failed = err
		if r.cancel != nil {
			r.cancel()
		}
	}
}

// failure is the write that failed, if any.
func (r *Reflector) failure() error {
	r.failMu.Lock()
	defer r.failMu.Unlock()
	return r.failed
}

// write applies one batch's calls in one transaction, as one Writer batch:
// each service's frontends are derived once for the batch. Invalid input
// is rejected call by call (check) and the rest committed; any other
// error aborts the whole transaction and is returned.
func (r *Reflector) write(ws writes) error {
	txn := r.w.WriteTxn()
	defer txn.Abort()
	r.writeErr = nil
	err := r.w.Batch(txn, func() error {
		r.run(&ws, txn)
		return nil
	})
	if r.writeErr != nil { // the first, not the refresh's (which it may cause)
		err, r.writeErr = r.writeErr, nil
	}
	if err != nil {
		return fmt.Errorf("writing a batch of %d changes (aborted): %w", len(ws.calls), err)
	}
	txn.Commit()
	if ws.synced {
		r.src.Synced()
	}
	return nil
}

// prepare records a batch of events and returns the Writer calls that
// declare what changed.
//
// The calls of a service come in an order that spares the Writer work
// (it gives the same result in any order): declarations first, so that a
// new service's backends go straight into its row, then deleted
// declarations, then backends, so that the backends a deleted service
// releases re-select no frontend and rewrite no service row (the Writer
// keeps a batch's addresses of services without a row in the batch).
func (r *Reflector) prepare(batch []event) (ws writes) {
	ws = r.newWrites()
	call := ws.add
	for _, ev := range batch {
		switch obj := ev.obj.(type) {
		case *corev1.Service:
			c := r.touch(lb.NewServiceName(obj.Namespace, obj.Name))
			// A service's backends come from its slices alone (their
			// conditions say what publishNotReadyAddresses asks), so only
			// its declaration changes here.
			if c.e.svc != nil {
				r.nServices--
			}
			c.e.svc, c.declare = obj, true
			c.declaredBy = r.causeOf("Service", c.e.name, &obj.ObjectMeta, ev.deleted)
			if ev.deleted {
				c.e.svc = nil
				delete(r.unknown, c.e.name)
				delete(r.topologyNoted, c.e.name)
			} else {
				r.nServices++
			}
		case *discoveryv1.EndpointSlice:
			r.applySlice(obj, ev.deleted)
		case *metav1.PartialObjectMetadata: // every node's labels
			r.prepareNodeLabels(call, obj.Name, obj.Labels, ev.deleted)
		case *corev1.Node:
			r.prepareNodeLabels(call, obj.Name, obj.Labels, ev.deleted) // a manifests directory has no metadata feed
			if obj.Name != r.cfg.K8sNodeName {
				continue
			}
			if ev.deleted {
				continue // keep the last known node: selection needs one
			}
			r.node = obj
			r.setNode(call)
			byNode := r.causeOf("Node", lb.ServiceName{}, &obj.ObjectMeta, false)
			for _, e := range r.services { // NodePort frontends follow the node's addresses
				if e.svc != nil {
					c := r.touch(e.name)
					c.declare, c.declaredBy = true, byNode
				}
			}
			for _, pod := range r.pods { // and so do HostPort frontends
				r.preparePod(call, pod, false)
			}
		case *corev1.Pod:
			r.preparePod(call, obj, ev.deleted)
		case nil:
			ws.synced = ws.synced || ev.synced
		}
	}
	changes := r.endBatch()
	if !r.nodeSet && r.cfg.K8sNodeZone != "" {
		r.setNode(call) // before any frontend is selected without it
	}
	r.src.SetObjects("services", r.nServices)
	r.src.SetObjects("endpointslices", r.nSlices)
	r.src.SetObjects("pods", len(r.pods))
	node := r.localNode() // once for the batch: every conversion reads it
	for i := range changes {
		if c := &changes[i]; c.declare && c.e.svc != nil {
			r.prepareService(&ws, &c.e, node, c.declaredBy)
		}
	}
	for i := range changes {
		if c := &changes[i]; c.declare && c.e.svc == nil {
			ws.addService(undeclareService, c.e.name, c.declaredBy)
		}
	}
	for i := range changes {
		if c := &changes[i]; c.backends {
			backends := r.backendsOf(&c.e)
			ws.addService(setBackends, c.e.name, c.backendsBy).backends = backends
		}
	}
	if ws.synced {
		known := r.known()
		call(func(txn statedb.WriteTxn) {
			r.w.SetCause(txn, &tables.Cause{Source: r.as.String(), Detail: "resync: objects gone while not watching"})
			// Declarations alone: the other sources of this identity
			// (policies, routes) sweep their own.
			r.check(r.w.SweepSourceOf(txn, r.as, tables.Declarations|tables.ProxyRedirects, func(n lb.ServiceName) bool {
				_, ok := known[n]
				return ok || !ownsName(n)
			}), "resync")
		})
	}
	return ws
}

// prepareService converts a service's Service and adds the calls that
// declare it (or delete its declaration, when lbstate does not balance
// it). A Service that does not convert leaves its previous declaration.
func (r *Reflector) prepareService(ws *writes, e *serviceEntry, node lb.Node, cause *tables.Cause) {
	name, svc := e.name, e.svc
	params, ok, unknown, err := convertService(svc, ServiceOptions{
		Node: node, LoadBalancerClasses: r.cfg.K8sLoadBalancerClasses, Source: r.as, NodePortRange: r.nodePorts,
	}, name) // the name the other rows share
	r.logUnknown(name, unknown)
	var (
		proxy      lb.ProxyRedirect
		proxied    bool
		proxyError error
	)
	if err == nil && ok {
		proxy, proxied, proxyError = ConvertProxyRedirect(svc, r.as)
	}
	switch {
	case err != nil:
		r.failAt(svc, err) // the previous declaration, if any, stays
	case proxyError != nil:
		r.failAt(svc, proxyError) // so does the previous proxy redirect
	case !ok:
		ws.addService(undeclareService, name, cause)
	default:
		params.TopologyKeys = r.topologyKeys(name, svc)
		c := ws.addService(declareService, name, cause)
		c.params, c.proxy, c.proxied = params, proxy, proxied
	}
}

// known returns the names of every service this reflector declares or
// holds backends for. At the synced marker the source's earlier
// declarations of any other service it owns (ownsName) are swept: a run
// that started over (its body was retried) has not seen those objects
// deleted.
func (r *Reflector) known() map[lb.ServiceName]struct{} {
	known := make(map[lb.ServiceName]struct{}, len(r.services)+len(r.pods))
	for _, e := range r.services {
		known[e.name] = struct{}{}
	}
	for _, pod := range r.pods {
		known[HostPortServiceName(pod)] = struct{}{}
	}
	return known
}

// ownsName reports whether the reflector may declare a service of this
// name: a Service's, or a pod's HostPort service (HostPortServiceName).
// Other sources of the same identity declare services under names no
// Service can have (NAME:SUFFIX, such as a redirect policy's target), and
// sweep them themselves.
func ownsName(n lb.ServiceName) bool {
	return !strings.Contains(n.Name(), ":") || strings.HasSuffix(n.Name(), hostPortSuffix)
}

// preparePod records a pod and the calls that declare (or remove) its
// HostPort service.
func (r *Reflector) preparePod(call func(func(statedb.WriteTxn)), pod *corev1.Pod, deleted bool) {
	name := HostPortServiceName(pod)
	var (
		params   lb.ServiceParams
		backends []lb.BackendParams
		ok       bool
	)
	if deleted {
		delete(r.pods, sliceKey{pod.Namespace, pod.Name})
	} else {
		r.pods[sliceKey{pod.Namespace, pod.Name}] = pod
		var err error
		if params, backends, ok, err = ConvertPod(pod, r.localNode()); err != nil {
			r.failAt(pod, err) // the previous declaration, if any, stays
			return
		}
	}
	cause := r.causeOf("Pod", lb.ServiceName{}, &pod.ObjectMeta, deleted)
	if !ok {
		call(func(txn statedb.WriteTxn) {
			r.w.SetCause(txn, cause)
			r.check(r.w.DeleteService(txn, name, r.as), name.String())
			r.check(r.w.SetBackends(txn, name, r.as), name.String())
		})
		return
	}
	params.Source = r.as
	call(func(txn statedb.WriteTxn) {
		r.w.SetCause(txn, cause)
		r.check(r.w.UpsertService(txn, params), name.String())
		r.check(r.w.SetBackends(txn, name, r.as, backends...), name.String())
	})
}

// applySlice records a slice change in the batch's changes of the
// services it affects. An update that is invalid as a whole is reported
// and leaves the slice's last valid version in place.
func (r *Reflector) applySlice(es *discoveryv1.EndpointSlice, deleted bool) {
	if !deleted {
		if err := sliceError(es); err != nil {
			r.failAt(es, err)
			return
		}
	}
	label := es.Labels[LabelServiceName]
	var name lb.ServiceName // the service it belongs to now, if not deleted
	if !deleted {
		name = lb.NewServiceName(es.Namespace, label)
	}
	key := sliceKey{es.Namespace, es.Name}
	if old, known := r.sliceService(key, label, name); known {
		c := r.touch(old)
		c.backendsBy = r.causeOf("EndpointSlice", c.e.name, &es.ObjectMeta, deleted)
		if !deleted && old == name { // an update: the slice stays with its service
			c.e.putSlice(es)
			c.backends = true
			return
		}
		c.e.removeSlice(es.Name)
		c.backends = true
		delete(r.slices, key)
		r.nSlices--
	}
	if deleted {
		return
	}
	c := r.touch(name)
	c.e.putSlice(es)
	c.backends = true
	c.backendsBy = r.causeOf("EndpointSlice", c.e.name, &es.ObjectMeta, false)
	r.nSlices++
	if owner, ok := sliceOwner(es.Name); !ok || owner != label {
		r.slices[key] = c.e.name
	}
}

// sliceService returns the service that holds a slice, if any: the one
// r.slices records, or else the one its name says (sliceOwner), if that
// one has it. label and name are the slice's label and the service it
// names (zero when unknown): a slice's owner is nearly always its label,
// whose name is then not built twice.
func (r *Reflector) sliceService(key sliceKey, label string, name lb.ServiceName) (lb.ServiceName, bool) {
	if s, ok := r.slices[key]; ok {
		return s, true
	}
	owner, ok := sliceOwner(key.name)
	if !ok {
		return lb.ServiceName{}, false
	}
	if owner != label || name == (lb.ServiceName{}) {
		name = lb.NewServiceName(key.namespace, owner)
	}
	if c := r.touch(name); c.e.hasSlice(key.name) {
		return c.e.name, true
	}
	return lb.ServiceName{}, false
}

// sliceOwner returns the service a slice's name says it belongs to: the
// EndpointSlice controller names a service's slices SERVICE-xxxxx. A
// slice kept under that service needs no entry in r.slices, which only
// records the others (named otherwise, or relabelled).
func sliceOwner(slice string) (string, bool) {
	i := strings.LastIndexByte(slice, '-')
	if i <= 0 {
		return "", false
	}
	return slice[:i], true
}

// sliceError says what makes a slice unusable as a whole (no service
// label, a bad weight annotation or port), or nil. It is checked when the
// slice arrives, so that an update with a typo never replaces the version
// that works, and is reported once, not every time the service's backends
// are derived.
func sliceError(es *discoveryv1.EndpointSlice) error {
	if es.Labels[LabelServiceName] == "" {
		_, _, _, err := ConvertEndpointSlice(es)
		return err
	}
	var ports [2]slicePort
	_, err := newSliceConverter(es, ports[:0])
	return err
}

// backendsOf merges the backends of all slices of a service. An address
// in two slices (an endpoint moving between them) keeps its better state.
func (r *Reflector) backendsOf(e *serviceEntry) []lb.BackendParams {
	var out []lb.BackendParams
	index := smallset.NewIndex(func(b *lb.BackendParams) lb.L3n4Addr { return b.Address })
	// seen has the bit (addrBit) of every address kept: one whose bit is
	// clear is new, with no search of those kept (searches of ten
	// backends were a quarter of this function's CPU).
	var seen uint64
	for es := range e.slices() { // in order of name, so the result does not depend on arrival
		if out == nil {
			out = make([]lb.BackendParams, 0, sliceBackends(es))
		}
		// Converted at the end of out, then kept, merged into an earlier
		// one of the same address, or dropped, in place.
		kept := len(out)
		var errs []error
		var err error
		out, errs, err = appendSliceBackends(out, es)
		if err != nil {
			r.failAt(es, err)
		}
		for _, e := range errs {
			r.failAt(es, e)
		}
		for _, b := range out[kept:] {
			if err := r.unreachable(es, b.Address.Addr()); err != nil {
				r.failAt(es, err)
				continue
			}
			bit := addrBit(b.Address)
			if seen&bit != 0 {
				if i := index.Find(out[:kept], b.Address); i >= 0 {
					if b.State < out[i].State {
						out[i] = b
					}
					continue
				}
			}
			seen |= bit
			out[kept] = b
			kept++
		}
		clear(out[kept:]) // no references kept beyond the length
		out = out[:kept]
	}
	return out
}

// sliceBackends is how many backends a slice gives at most: one per
// address and port.
func sliceBackends(es *discoveryv1.EndpointSlice) int {
	n := 0
	for _, ep := range es.Endpoints {
		n += len(ep.Addresses)
	}
	return n * max(len(es.Ports), 1)
}

// AcceptLoopbackEndpoints lets endpoints on loopback addresses be
// backends: a manifests directory may name them (a host without a cluster
// balancing over its own processes), the API server never does. Call it
// before Run.
func (r *Reflector) AcceptLoopbackEndpoints() { r.loopbackOK = true }

// unreachable reports an endpoint address that traffic from another
// network namespace cannot reach, as the API server rejects it in an
// EndpointSlice (kube-proxy never sees one): link-local, and loopback,
// unless AcceptLoopbackEndpoints was called.
func (r *Reflector) unreachable(es *discoveryv1.EndpointSlice, a netip.Addr) error {
	switch {
	case a.IsLinkLocalUnicast():
		return fmt.Errorf("endpointslice %s/%s: endpoint %s: link-local address", es.Namespace, es.Name, a)
	case a.IsLoopback() && !r.loopbackOK:
		return fmt.Errorf("endpointslice %s/%s: endpoint %s: loopback address", es.Namespace, es.Name, a)
	}
	return nil
}

// setNode declares the local node.
func (r *Reflector) setNode(call func(func(statedb.WriteTxn))) {
	r.nodeSet = true
	node := r.localNode()
	call(func(txn statedb.WriteTxn) { r.check(r.w.SetLocalNode(txn, r.as, node), "node "+node.Name) })
}

// localNode is the local node in the model: name, zone, labels and
// addresses (internal and external IPs).
func (r *Reflector) localNode() (n lb.Node) {
	n = lb.Node{Name: r.cfg.K8sNodeName}
	defer func() { // the override applies to every way out
		if zone := r.cfg.K8sNodeZone; zone != "" {
			n.Zone = zone
			n.Labels = maps.Clone(n.Labels)
			if n.Labels == nil {
				n.Labels = map[string]string{}
			}
			n.Labels[LabelTopologyZone] = zone
		}
	}()
	if r.node == nil {
		return n
	}
	n.Labels = r.node.Labels
	n.Zone = r.node.Labels[LabelTopologyZone]
	for _, a := range r.node.Status.Addresses {
		if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil && !slices.Contains(n.Addresses, ip.Unmap()) {
			n.Addresses = append(n.Addresses, ip.Unmap())
		}
	}
	return n
}

// check reports a Writer error about one object: invalid input is
// rejected; any other error is kept for write, which aborts the batch.
func (r *Reflector) check(err error, object string) {
	switch {
	case err == nil:
	case errors.Is(err, tables.ErrInvalid):
		r.src.Reject(fmt.Errorf("%s: %w", object, err))
	case r.writeErr == nil:
		r.writeErr = fmt.Errorf("%s: %w", object, err)
	}
}

// fail reports a conversion error: invalid input.
func (r *Reflector) fail(err error) { r.src.Reject(tables.AsInvalid(err)) }

// failAt reports a conversion error of obj, where a manifest declares it.
func (r *Reflector) failAt(obj any, err error) { r.fail(kubeapi.AtOrigin(obj, err)) }

// causeBlock is how many causes one allocation holds (newCause).
const causeBlock = 16

// newCause returns a zero Cause carved from the current block: one heap
// object for sixteen events. Called by the loop alone.
func (r *Reflector) newCause() *tables.Cause {
	if len(r.causes) == 0 {
		r.causes = make([]tables.Cause, causeBlock)
	}
	c := &r.causes[0]
	r.causes = r.causes[1:]
	return c
}

// causeOf is what the history says an object's event caused: its kind,
// name and resourceVersion (the API server's), or for a manifests
// directory's object the file and line that declare it. svc, if not
// zero, is the service it belongs to, in the same namespace: the cause
// takes its strings, which the rows keep anyway, rather than keep the
// object's (the service's name too, for a Service).
func (r *Reflector) causeOf(kind string, svc lb.ServiceName, m *metav1.ObjectMeta, deleted bool) *tables.Cause {
	c := r.newCause()
	*c = tables.Cause{Source: r.as.String(), Kind: kind, Namespace: m.Namespace, Name: m.Name, ResourceVersion: m.ResourceVersion}
	if !svc.IsZero() && svc.Namespace() == m.Namespace {
		c.Namespace = svc.Namespace()
		if kind == "Service" {
			c.Name = svc.Name()
		}
	}
	if at := m.Annotations[kubeapi.AnnotationManifestOrigin]; at != "" && m.ResourceVersion == "" {
		c.Version = "at " + at // a manifests directory's FILE:LINE
	}
	if deleted {
		c.Detail = "deleted"
	}
	return c
}
