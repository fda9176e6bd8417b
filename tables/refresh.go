package tables

import (
	"maps"
	"slices"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/lbstate/lbstate/lb"
)

// changes collects what one Writer call affected, so that the derived
// state (frontend rows, their backends, conflicts) is refreshed once, at
// the end of the call.
type changes struct {
	services   map[lb.ServiceName]struct{} // re-select these services' frontends
	addrs      map[lb.L3n4Addr]struct{}    // re-decide who owns these addresses
	contenders map[lb.ServiceName]struct{} // bring these services' conflicts up to date
	err        error
}

func (w *Writer) changes() *changes {
	return &changes{
		services:   map[lb.ServiceName]struct{}{},
		addrs:      map[lb.L3n4Addr]struct{}{},
		contenders: map[lb.ServiceName]struct{}{},
	}
}

func (ch *changes) fail(err error) {
	if ch.err == nil {
		ch.err = err
	}
}

// flush refreshes what ch recorded:
//  1. each recorded address goes to the service that outranks the other
//     claimants (higher source priority, then smaller name), or its
//     frontend row is deleted when no service claims it any more;
//  2. the frontends of each recorded service, where it owns them, get
//     their backends selected again;
//  3. every service that changed or took part in an address decision gets
//     its list of conflicts (addresses it declares but another service
//     owns) brought up to date.
func (w *Writer) flush(txn statedb.WriteTxn, ch *changes) error {
	if ch.err != nil {
		return ch.err
	}
	owners := make(map[lb.L3n4Addr]lb.ServiceName, len(ch.addrs))
	// The services this call changed; with the row's owner and the
	// services in conflict over an address, they are its claimants.
	changed := slices.Collect(maps.Keys(ch.contenders))
	contenders := ch.contenders
	// Sorted, so that rows are written (and later numbered by the
	// reconciler) in the same order every time.
	for _, addr := range sortedKeys(ch.addrs, lb.L3n4Addr.Compare) {
		var winner *lb.Service
		claim := func(name lb.ServiceName) {
			s, found := w.service(txn, name)
			if !found || !claims(s, addr) {
				return
			}
			contenders[s.Name] = struct{}{}
			if winner == nil || outranks(s, winner) {
				winner = s
			}
		}
		cur, _, found := w.t.Frontends.Get(txn, FrontendByAddress.Query(addr))
		if found {
			contenders[cur.Service] = struct{}{}
			claim(cur.Service)
		}
		for s := range w.t.Services.List(txn, ServiceByConflict.Query(addr)) {
			claim(s.Name)
		}
		for _, name := range changed {
			claim(name)
		}
		if winner == nil {
			if found {
				_, _, err := w.t.Frontends.Delete(txn, cur)
				ch.fail(err)
			}
			continue
		}
		owners[addr] = winner.Name
		ch.services[winner.Name] = struct{}{}
	}

	// The node is looked up once, and only if a service's policy needs it.
	var (
		node       *lb.Node
		nodeLooked bool
	)
	localNode := func() *lb.Node {
		if !nodeLooked {
			node, _ = w.localNode(txn)
			nodeLooked = true
		}
		return node
	}
	for _, name := range sortedKeys(ch.services, lb.ServiceName.Compare) {
		w.refreshService(txn, ch, name, owners, localNode)
	}
	for name := range contenders {
		w.refreshConflicts(txn, ch, name)
	}
	return ch.err
}

// claims reports whether the declaration in force of s has a frontend at
// addr.
func claims(s *lb.Service, addr lb.L3n4Addr) bool {
	p := s.Policy()
	return p != nil && slices.ContainsFunc(p.Frontends, func(fe lb.FrontendParams) bool { return fe.Address == addr })
}

// outranks reports whether service a wins a frontend address over b.
func outranks(a, b *lb.Service) bool {
	pa, pb := a.Policy(), b.Policy()
	if pa.Source != pb.Source {
		return pa.Source.Outranks(pb.Source)
	}
	return a.Name.Compare(b.Name) < 0
}

// refreshService re-derives the frontend rows that service name owns.
// owners holds the addresses decided in this flush; for the others the
// current row says who owns them.
func (w *Writer) refreshService(txn statedb.WriteTxn, ch *changes, name lb.ServiceName, owners map[lb.L3n4Addr]lb.ServiceName, localNode func() *lb.Node) {
	svc, found := w.service(txn, name)
	if !found || svc.Policy() == nil {
		return
	}
	policy := svc.Policy()
	var node *lb.Node // selection reads it only for Local policies and topology
	if policy.ExtTrafficPolicy == lb.TrafficPolicyLocal || policy.IntTrafficPolicy == lb.TrafficPolicyLocal ||
		policy.TrafficDistribution != lb.TrafficDistributionDefault {
		node = localNode()
	}
	target, redirectedTo := name, lb.ServiceName{}
	if r := svc.Redirect(); r != nil {
		target, redirectedTo = r.To, r.To
	}
	cands := w.candidates(txn, target)
	for _, params := range policy.Frontends {
		cur, _, found := w.t.Frontends.Get(txn, FrontendByAddress.Query(params.Address))
		owner, decided := owners[params.Address]
		if !decided && found {
			owner = cur.Service
		}
		if owner != name {
			continue
		}
		next := &lb.Frontend{
			FrontendParams: params,
			Service:        name,
			Policy:         policy,
			RedirectedTo:   redirectedTo,
			Backends:       SelectBackends(params, policy, node, !redirectedTo.IsZero(), cands),
		}
		if found {
			if sameFrontend(cur, next) {
				continue
			}
			next.ID = cur.ID // the reconciler's, kept until it reconciles again
		}
		next.Status = reconciler.StatusPending()
		_, _, err := w.t.Frontends.Insert(txn, next)
		ch.fail(err)
	}
}

// candidates returns the backends of a service, each with the parameters
// of the highest-priority source that declares it for that service.
func (w *Writer) candidates(txn statedb.ReadTxn, name lb.ServiceName) []Candidate {
	var cands []Candidate
	for b := range w.t.Backends.List(txn, BackendByService.Query(name)) {
		if inst, ok := b.ForService(name); ok {
			cands = append(cands, Candidate{Params: &inst.Params, Unhealthy: b.Unhealthy})
		}
	}
	return cands
}

func sameFrontend(a, b *lb.Frontend) bool {
	return a.FrontendParams == b.FrontendParams &&
		a.Service == b.Service &&
		a.RedirectedTo == b.RedirectedTo &&
		(a.Policy == b.Policy || a.Policy.Equal(b.Policy)) &&
		slices.Equal(a.Backends, b.Backends)
}

// refreshConflicts brings a service's list of lost frontend addresses up to
// date and logs each new one.
func (w *Writer) refreshConflicts(txn statedb.WriteTxn, ch *changes, name lb.ServiceName) {
	svc, found := w.service(txn, name)
	if !found {
		return
	}
	var conflicts []lb.FrontendConflict
	if p := svc.Policy(); p != nil {
		for _, fe := range p.Frontends {
			cur, _, found := w.t.Frontends.Get(txn, FrontendByAddress.Query(fe.Address))
			if found && cur.Service != name {
				conflicts = append(conflicts, lb.FrontendConflict{Address: fe.Address, Owner: cur.Service})
			}
		}
	}
	if slices.Equal(conflicts, svc.Conflicts) {
		return
	}
	for _, c := range conflicts {
		if !slices.Contains(svc.Conflicts, c) {
			w.log.Warn("Frontend address conflict: the service does not get the address",
				"service", name, "address", c.Address, "owner", c.Owner)
		}
	}
	next := svc.Clone()
	next.Conflicts = conflicts
	_, _, err := w.t.Services.Insert(txn, next)
	ch.fail(err)
}

// sortedKeys returns the keys of m in order, without sorting one key.
func sortedKeys[K comparable](m map[K]struct{}, cmp func(K, K) int) []K {
	if len(m) <= 1 {
		for k := range m {
			return []K{k}
		}
		return nil
	}
	return slices.SortedFunc(maps.Keys(m), cmp)
}
