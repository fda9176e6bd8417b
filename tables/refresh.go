package tables

import (
	"slices"
	"sync"
	"time"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/lbstate/lbstate/lb"
)

// changes collects what one Writer call (or one Batch of calls) affected,
// so that the derived state (frontend rows, their backends, conflicts) is
// refreshed once, at its end.
type changes struct {
	// touched are the services the call recorded (touched.go), byName
	// their indexes, last the index+1 of the one used last (0: none).
	// order holds the services whose frontends flush selects again, in
	// the order they were recorded (add them with refresh only);
	// contenders those whose conflicts it brings up to date; backendsOf
	// those whose backends changed.
	touched    []touched
	byName     map[lb.ServiceName]int32
	last       int32
	order      []int32
	contenders []int32
	backendsOf []int32
	// addrs are the addresses whose owner flush decides again, in the
	// order they were recorded (claim), addrSet the same as a set;
	// claimers the record of the service whose call recorded each (the
	// owner of its row, nearly always: flush finds it without a hash).
	addrs    []lb.L3n4Addr
	claimers []int32
	addrSet  map[lb.L3n4Addr]struct{}
	err      error

	// History: the transaction that stages entries (nil: none kept) and
	// the cause of the call under way (each service's causes are in its
	// record).
	jt    *journalTxn
	cause *Cause

	// Scratch space of flush.
	owners     map[lb.L3n4Addr]decision
	claimedBy  map[lb.L3n4Addr]claimants
	gone       []goneRow // frontend rows no service claims any more
	node       *lb.Node
	nodeLooked bool
	// Candidates of the service refreshService is at, and of its
	// redirect's target: reused from one service to the next (a service
	// merged from many clusters has hundreds).
	ownCands, redirectCands []Candidate
	sel                     selectScratch
	key                     addrKeyBuf
	// Scratch lists of changeBackendAddrs (mergedAddrs), of the rows
	// setBackends and releaseBackends release (stale), and of
	// releaseRows and upsertBackends (scratchAddrs).
	mergedAddrs, scratchAddrs []lb.L3n4Addr
	stale                     []*lb.Backend
	// wroteRows are the backend rows upsertBackends wrote, by service
	// (touched.wrote), and backendEpoch what invalidates them (wrote.go).
	wroteRows    []*lb.Backend
	backendEpoch uint32

	// In a Batch (batched): the service rows the batch inserted, which
	// no one outside the batch has seen yet, so that changeBackendAddrs
	// may change them in place instead of inserting a copy.
	batched bool
	fresh   map[*lb.Service]struct{}
	// orphaned are, in a Batch, the services without a row whose backend
	// addresses the batch changed (touched.orphans), written to
	// orphan-backends when it ends (see setOrphanAddrs).
	orphaned []int32
}

// claim records that flush decides again who owns addr, which the
// service of record i declares or declared.
func (ch *changes) claim(addr lb.L3n4Addr, i int32) {
	if _, ok := ch.addrSet[addr]; !ok {
		ch.addrSet[addr] = struct{}{}
		ch.addrs = append(ch.addrs, addr)
		ch.claimers = append(ch.claimers, i)
	}
}

// changesPool keeps the maps of earlier calls: a call records a handful
// of names, and fresh maps for each would cost more than the call.
var changesPool = sync.Pool{New: func() any {
	return &changes{
		byName:    map[lb.ServiceName]int32{},
		addrSet:   map[lb.L3n4Addr]struct{}{},
		owners:    map[lb.L3n4Addr]decision{},
		claimedBy: map[lb.L3n4Addr]claimants{},

		fresh: map[*lb.Service]struct{}{},
	}
}}

func (w *Writer) changes() *changes { return changesPool.Get().(*changes) }

// maxPooledChanges is the most names or addresses a changes may have
// recorded in one of its maps and still go back to the pool: a big change
// (a new node, a source going away) grows its maps to many thousands,
// which the pool would otherwise keep for good, while a source's batch
// (500 objects) records a few hundred in each, and growing fresh maps to
// that size for every batch cost a tenth of the Writer's time.
const maxPooledChanges = 2048

// release empties ch and returns it to the pool, unless a big change
// grew its maps.
func (ch *changes) release() {
	if max(len(ch.touched), len(ch.addrs), len(ch.fresh)) > maxPooledChanges {
		return
	}
	clear(ch.touched) // no table objects or causes kept alive in the pool
	clear(ch.byName)
	ch.touched, ch.last = ch.touched[:0], 0
	ch.contenders, ch.backendsOf = ch.contenders[:0], ch.backendsOf[:0]
	clear(ch.addrSet)
	ch.addrs, ch.claimers = ch.addrs[:0], ch.claimers[:0]
	clear(ch.owners)
	clear(ch.claimedBy)
	clear(ch.fresh)
	ch.orphaned = ch.orphaned[:0]
	ch.batched = false
	clear(ch.gone) // no table objects kept alive in the pool
	ch.gone, ch.mergedAddrs, ch.order = ch.gone[:0], ch.mergedAddrs[:0], ch.order[:0]
	ch.stale, ch.scratchAddrs = ch.stale[:0], ch.scratchAddrs[:0]
	if cap(ch.wroteRows) > 4*maxPooledChanges {
		ch.wroteRows = nil // a big change's: not kept in the pool
	}
	clear(ch.wroteRows) // no table objects kept alive in the pool
	ch.wroteRows, ch.backendEpoch = ch.wroteRows[:0], 0
	clear(ch.ownCands[:cap(ch.ownCands)]) // no table objects kept alive in the pool
	clear(ch.redirectCands[:cap(ch.redirectCands)])
	ch.ownCands, ch.redirectCands = ch.ownCands[:0], ch.redirectCands[:0]
	ch.sel.release()
	ch.err, ch.node, ch.nodeLooked = nil, nil, false
	ch.jt, ch.cause = nil, nil
	changesPool.Put(ch)
}

func (ch *changes) fail(err error) {
	if ch.err == nil {
		ch.err = err
	}
}

// localNode looks the node up once per call, and only if a service's
// policy needs it.
func (ch *changes) localNode(w *Writer, txn statedb.ReadTxn) *lb.Node {
	if !ch.nodeLooked {
		ch.node, _ = w.localNode(txn)
		ch.nodeLooked = true
	}
	return ch.node
}

// flush refreshes what ch recorded:
//  1. each recorded address goes to the service that outranks the other
//     claimants (outranks: the stronger claim, the higher source
//     priority, the older service, the smaller name), or its frontend
//     row is deleted when no service claims it any more;
//  2. the frontends of each recorded service, where it owns them, get
//     their backends selected again;
//  3. every service that changed or took part in an address decision gets
//     its list of conflicts (addresses it declares but another service
//     owns) brought up to date.
func (w *Writer) flush(txn statedb.WriteTxn, ch *changes) error {
	defer ch.release()
	if ch.err != nil {
		return ch.err
	}
	ch.batched = false // from here on, writes are not deferred
	for _, i := range ch.orphaned {
		t := &ch.touched[i]
		w.writeOrphans(txn, ch, t.name, t.orphans)
		t.orphans, t.orphaned = nil, false
	}
	ch.orphaned = ch.orphaned[:0]
	// Services redirected to one whose backends changed use them too.
	if len(ch.backendsOf) > 0 && w.anyService(txn, &w.seenRedirect, ServiceByRedirectTarget.QueryFromKey(nil)) {
		for _, i := range ch.backendsOf {
			name := ch.name(i)
			for s := range w.t.services.List(txn, ServiceByRedirectTarget.Query(name)) {
				ch.refreshBecause(s.Name, ch.causesOf(name))
			}
		}
	}
	// Services routed to one whose backends or declaration changed.
	if len(ch.order) > 0 && w.anyService(txn, &w.seenRoute, ServiceByRouteTarget.QueryFromKey(nil)) {
		for _, i := range ch.order { // (those recorded before, not those it adds)
			name := ch.name(i)
			for s := range w.t.services.List(txn, ServiceByRouteTarget.Query(name)) {
				ch.refreshBecause(s.Name, ch.causesOf(name))
			}
		}
	}
	// The services this call changed, by the addresses they claim; with
	// the row's owner and the services in conflict over an address, they
	// are its claimants.
	for _, i := range ch.contenders {
		if s, found := w.rowOf(txn, ch, i); found && s.Policy() != nil {
			for _, fe := range s.Policy().Frontends {
				ch.claimedBy[fe.Address] = ch.claimedBy[fe.Address].with(s)
			}
		}
	}
	conflicts := len(ch.addrs) > 0 && w.anyService(txn, &w.seenConflict, ServiceByConflict.QueryFromKey(nil))
	for k, addr := range ch.addrs {
		var winner *lb.Service
		cur, found := w.frontendAt(txn, addr, &ch.key)
		var rec int32 // the record of cur's service
		if found {
			if rec = ch.claimers[k]; ch.name(rec) != cur.Service {
				rec = ch.at(cur.Service)
			}
			ch.contendAt(rec)
			winner = w.claimantAt(txn, ch, addr, rec, winner)
		}
		if conflicts {
			winner = w.conflictClaimants(txn, ch, addr, winner)
		}
		if c := ch.claimedBy[addr]; c.first != nil {
			winner = better(ch, addr, c.first, winner)
			for _, s := range c.more {
				winner = better(ch, addr, s, winner)
			}
		}
		if winner == nil {
			if found {
				ch.gone = append(ch.gone, goneRow{addr, cur, rec})
			}
			continue
		}
		ch.owners[addr] = decision{owner: winner.Name, row: cur}
		ch.refreshBecause(winner.Name, ch.causesOf(winner.Name))
	}
	// Rows are deleted in the order their addresses were recorded, and
	// written in order of name (below), so that the reconciler sees (and
	// numbers) them in the same order every time the same calls are
	// made. (The recorded order spares a sort by address, which cost 6%
	// of the Writer's time in a delete of 50,000 services.)
	for _, d := range ch.gone {
		_, _, err := w.t.frontends.Delete(txn, d.row)
		ch.fail(err)
		if ch.jt != nil {
			ch.stage(historyEntry{addr: d.addr, service: d.row.Service, causes: ch.causesAt(d.rec), old: d.row, deleted: true})
		}
	}

	// By name, so that rows are written (and later numbered by the
	// reconciler) in the same order every time. A source that makes its
	// calls in order of name (the Kubernetes reflector does) spares the
	// sort.
	if !slices.IsSortedFunc(ch.order, ch.byNameOrder) {
		slices.SortFunc(ch.order, ch.byNameOrder)
	}
	for _, i := range ch.order {
		w.refreshService(txn, ch, i)
	}
	for _, i := range ch.contenders {
		w.refreshConflicts(txn, ch, i)
	}
	return ch.err
}

// decision is who a flush decided owns an address, and the address's
// frontend row when it decided (nil: none), which only the owner's
// refreshService replaces.
type decision struct {
	owner lb.ServiceName
	row   *lb.Frontend
}

// goneRow is a frontend row a flush deletes, its address, and the
// record of its service (whose causes the journal stages: found by index,
// not by its name hashed again).
type goneRow struct {
	addr lb.L3n4Addr
	row  *lb.Frontend
	rec  int32
}

// claimants are the services a flush found claiming one address: nearly
// always one, kept without a slice of its own.
type claimants struct {
	first *lb.Service
	more  []*lb.Service
}

func (c claimants) with(s *lb.Service) claimants {
	if c.first == nil {
		c.first = s
	} else {
		c.more = append(c.more, s)
	}
	return c
}

// conflictClaimants returns the best of winner and the services in
// conflict over addr.
func (w *Writer) conflictClaimants(txn statedb.ReadTxn, ch *changes, addr lb.L3n4Addr, winner *lb.Service) *lb.Service {
	for s := range w.t.services.List(txn, ServiceByConflict.Query(addr)) {
		winner = w.claimant(txn, ch, addr, s.Name, winner)
	}
	return winner
}

// claimant returns the better of winner and service name, if name claims
// addr, and records name as a contender.
func (w *Writer) claimant(txn statedb.ReadTxn, ch *changes, addr lb.L3n4Addr, name lb.ServiceName, winner *lb.Service) *lb.Service {
	return w.claimantAt(txn, ch, addr, ch.at(name), winner)
}

// claimantAt is claimant for the service of record i.
func (w *Writer) claimantAt(txn statedb.ReadTxn, ch *changes, addr lb.L3n4Addr, i int32, winner *lb.Service) *lb.Service {
	s, found := w.rowOf(txn, ch, i)
	if !found || !claims(s, addr) {
		return winner
	}
	ch.contendAt(i)
	return outranking(addr, s, winner)
}

// better records claimant s as a contender and returns the better claimant
// of addr of s and winner.
func better(ch *changes, addr lb.L3n4Addr, s, winner *lb.Service) *lb.Service {
	ch.contend(s.Name)
	return outranking(addr, s, winner)
}

// outranking returns the better claimant of addr of s and winner (nil:
// none yet).
func outranking(addr lb.L3n4Addr, s, winner *lb.Service) *lb.Service {
	if winner == nil || outranks(s, winner, addr) {
		return s
	}
	return winner
}

// flushService returns the service row of name, remembering it for the
// rest of the flush (which writes service rows only last, in
// refreshConflicts, and records them here).
func (w *Writer) flushService(txn statedb.ReadTxn, ch *changes, name lb.ServiceName) (*lb.Service, bool) {
	return w.rowOf(txn, ch, ch.at(name))
}

// rowOf returns the service row of record i of ch, looked up the first
// time.
func (w *Writer) rowOf(txn statedb.ReadTxn, ch *changes, i int32) (*lb.Service, bool) {
	t := &ch.touched[i]
	if !t.rowKnown {
		t.row, _ = w.lookupService(txn, t.name)
		t.rowKnown = true
	}
	return t.row, t.row != nil
}

// claims reports whether the declaration in force of s has a frontend at
// addr.
func claims(s *lb.Service, addr lb.L3n4Addr) bool {
	_, ok := frontendAt(s.Policy(), addr)
	return ok
}

// frontendAt returns p's frontend at addr.
func frontendAt(p *lb.ServiceParams, addr lb.L3n4Addr) (lb.FrontendParams, bool) {
	if p != nil {
		for _, fe := range p.Frontends {
			if fe.Address == addr {
				return fe, true
			}
		}
	}
	return lb.FrontendParams{}, false
}

// outranks reports whether service a wins frontend address addr over b,
// both claiming it. By how each claimed it first (lb.Claim: an address
// named for a service before a NodePort or host port that reaches it only
// because the node has it), then by source priority, then the older
// service (an unknown creation time counts as the newest), and only last
// by name: renaming a namespace must not move an address.
func outranks(a, b *lb.Service, addr lb.L3n4Addr) bool {
	pa, pb := a.Policy(), b.Policy()
	fa, _ := frontendAt(pa, addr)
	fb, _ := frontendAt(pb, addr)
	switch {
	case fa.Claim != fb.Claim:
		return fa.Claim.Outranks(fb.Claim)
	case pa.Source != pb.Source:
		return pa.Source.Outranks(pb.Source)
	case !pa.Created.Equal(pb.Created):
		return olderThan(pa.Created, pb.Created)
	}
	return a.Name.Compare(b.Name) < 0
}

// olderThan reports whether creation time a is before b, where the zero
// time (unknown) is after every known time.
func olderThan(a, b time.Time) bool {
	if a.IsZero() || b.IsZero() {
		return b.IsZero() && !a.IsZero()
	}
	return a.Before(b)
}

// refreshService re-derives the frontend rows that service name owns.
// ch.owners holds the addresses decided in this flush; for the others the
// current row says who owns them.
func (w *Writer) refreshService(txn statedb.WriteTxn, ch *changes, i int32) {
	name := ch.name(i)
	svc, found := w.rowOf(txn, ch, i)
	if !found || svc.Policy() == nil {
		return
	}
	policy := svc.Policy()
	var node *lb.Node // selection reads it only for Local policies and topology
	if policy.ExtTrafficPolicy == lb.TrafficPolicyLocal || policy.IntTrafficPolicy == lb.TrafficPolicyLocal ||
		policy.TrafficDistribution != lb.TrafficDistributionDefault || len(policy.TopologyKeys) > 0 {
		node = ch.localNode(w, txn)
	}
	r, pr := svc.Redirect(), svc.ProxyRedirect()
	// Each set of candidates is read once, and only if a frontend uses it.
	// The service's own are read even for a redirected frontend: the
	// backends it would have without the redirect are kept (Hidden).
	var own, redirectCands []Candidate
	var redirectRead bool
	own = w.rowCandidates(txn, ch, i, svc.BackendAddrs(), ch.ownCands[:0])
	ch.ownCands = own
	// Routes' candidates, by backend service, read on a route's first use.
	var routeCands map[lb.ServiceName][]Candidate
	if len(policy.TopologyKeys) > 0 { // the only services that read node labels
		w.topologyCandidates(txn, ch, own)
	}
	w.trackTopology(txn, ch, name, policy.TopologyKeys, own)
	for _, params := range policy.Frontends {
		d, decided := ch.owners[params.Address]
		cur, found := d.row, d.row != nil
		if !decided {
			if cur, found = w.frontendAt(txn, params.Address, &ch.key); found {
				d.owner = cur.Service
			}
		}
		if d.owner != name {
			continue
		}
		refs, level := selectBackends(&ch.sel, params, policy, node, false, own)
		w.noteRefusedZone(name, params.Address, &ch.sel)
		x := lb.FrontendExtras{TopologyLevel: level}
		if r != nil && r.Covers(params) {
			if !redirectRead {
				redirectCands, redirectRead = w.candidates(txn, r.To, w.flushBackendAddrs(txn, ch, r.To), ch.redirectCands[:0], &ch.key), true
				ch.redirectCands = redirectCands
			}
			x.Hidden = slices.Clone(refs)
			x.RedirectedTo, x.SkipFromBackend = r.To, r.SkipFromBackend
			refs, x.TopologyLevel = selectBackends(&ch.sel, params, policy, node, true, redirectCands)
			w.noteRefusedZone(r.To, params.Address, &ch.sel)
		} else if route := routeFor(svc, policy, params); route != nil {
			if routeCands == nil {
				routeCands = map[lb.ServiceName][]Candidate{name: own}
			}
			x.Hidden = slices.Clone(refs)
			x.RoutedBy = route.Name
			refs, x.Rejected = w.routeBackends(txn, svc, params, route, routeCands)
			x.TopologyLevel = ""
		}
		if pr != nil && pr.Covers(params) {
			x.ProxyPort = pr.ProxyPort
		}
		if found && sameFrontend(cur, params, name, policy, refs, &x) {
			continue
		}
		// Built only now: most refreshes leave the row as it is.
		next := &lb.Frontend{FrontendParams: params, Service: name, Policy: policy}
		switch len(refs) {
		case 0:
			refs = []lb.BackendRef{} // encoded as [], not null
		case 1: // SetBackends keeps it in the row
		default:
			refs = slices.Clone(refs) // out of the scratch space
		}
		next.SetBackends(refs)
		next.SetExtras(x)
		if found {
			next.ID = cur.ID // the reconciler's, kept until it reconciles again
		}
		next.Status = reconciler.StatusPending()
		_, _, err := w.t.frontends.Insert(txn, next)
		ch.fail(err)
		if ch.jt != nil {
			e := historyEntry{addr: params.Address, service: name, causes: ch.causesOf(name)}
			if found {
				e.old = cur
			}
			ch.stage(e)
		}
	}
}

// flushBackendAddrs is backendAddrs in a flush, which keeps the rows it
// reads.
func (w *Writer) flushBackendAddrs(txn statedb.ReadTxn, ch *changes, name lb.ServiceName) []lb.L3n4Addr {
	if s, found := w.flushService(txn, ch, name); found {
		return s.BackendAddrs()
	}
	return w.orphanAddrs(txn, name)
}

// candidates appends to cands the backends of a service at addrs (its
// backendAddrs), each with the parameters of the highest-priority source
// that declares it for that service, looking them up with buf.
func (w *Writer) candidates(txn statedb.ReadTxn, name lb.ServiceName, addrs []lb.L3n4Addr, cands []Candidate, buf *addrKeyBuf) []Candidate {
	for _, addr := range addrs {
		b, found := w.backendAt(txn, addr, buf)
		if !found {
			continue
		}
		cands = appendCandidate(cands, b, name)
	}
	return cands
}

// appendCandidate appends b's candidate for a service, if it has an
// instance for it.
func appendCandidate(cands []Candidate, b *lb.Backend, name lb.ServiceName) []Candidate {
	if inst, ok := b.ForService(name); ok {
		cands = append(cands, Candidate{Params: &inst.Params, Unhealthy: b.Unhealthy, Remote: inst.Params.Remote()})
	}
	return cands
}

// routeFor returns the route in force on a frontend of svc, if any (most
// services have none, and are spared the search for the service port).
func routeFor(svc *lb.Service, policy *lb.ServiceParams, fe lb.FrontendParams) *lb.Route {
	if len(svc.Routes()) == 0 {
		return nil
	}
	return svc.RouteFor(policy.ServicePort(fe))
}

// sameFrontend reports whether row a is what refreshService derived.
func sameFrontend(a *lb.Frontend, params lb.FrontendParams, name lb.ServiceName, policy *lb.ServiceParams, refs []lb.BackendRef, x *lb.FrontendExtras) bool {
	return a.FrontendParams == params &&
		a.Service == name &&
		(a.Policy == policy || a.Policy.Equal(policy)) &&
		slices.Equal(a.Backends, refs) &&
		a.HasExtrasEqual(x)
}

// refreshConflicts brings a service's list of lost frontend addresses up to
// date and logs each new one.
func (w *Writer) refreshConflicts(txn statedb.WriteTxn, ch *changes, i int32) {
	name := ch.name(i)
	svc, found := w.rowOf(txn, ch, i)
	if !found {
		return
	}
	var conflicts []lb.FrontendConflict
	if p := svc.Policy(); p != nil {
		for _, fe := range p.Frontends {
			// An address decided in this flush has its row written by now.
			d, decided := ch.owners[fe.Address]
			owner := d.owner
			if !decided {
				if cur, found := w.frontendAt(txn, fe.Address, &ch.key); found {
					owner = cur.Service
				}
			}
			if !owner.IsZero() && owner != name {
				conflicts = append(conflicts, lb.FrontendConflict{Address: fe.Address, Owner: owner})
			}
		}
	}
	if slices.Equal(conflicts, svc.Conflicts()) {
		return
	}
	for _, c := range conflicts {
		if !slices.Contains(svc.Conflicts(), c) {
			w.log.Warn("Frontend address conflict: the service does not get the address",
				"service", name, "address", c.Address, "owner", c.Owner)
		}
	}
	next := svc.WithConflicts(conflicts)
	err := w.insertService(txn, ch, next)
	ch.remember(name, next)
	ch.fail(err)
}
