package k8s

import (
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors/routes"
)

// The reflector applies traffic splits (Gateway API routes on Services,
// SMI TrafficSplits) as lb.Routes on their parent Services, from the
// objects' last valid versions and the ReferenceGrants.

// prepareRouteObject records a route, split or grant. An invalid update
// is reported and leaves the last valid version in force.
func (r *Reflector) prepareRouteObject(key routes.Key, obj any, deleted bool) {
	if key.Kind == "ReferenceGrant" {
		r.routesAll = true // a grant may change any object's refs
		if deleted {
			delete(r.grants, key)
			return
		}
		g, err := routes.ReadGrant(obj)
		if err != nil {
			r.fail(err)
			return
		}
		r.grants[key] = g
		return
	}
	var o *routes.Object
	if !deleted {
		var err error
		if o, err = routes.Read(obj); err != nil {
			r.fail(err)
			return
		}
	}
	if old := r.routeObjs[key]; old != nil {
		r.claim(key, old, false)
	}
	if o == nil {
		delete(r.routeObjs, key)
		r.routesGone[key] = struct{}{}
		return
	}
	r.routeObjs[key] = o
	r.claim(key, o, true)
}

// claim records (add) or forgets that o, under key, names its parents,
// and marks them for planning.
func (r *Reflector) claim(key routes.Key, o *routes.Object, add bool) {
	for _, p := range o.Parents {
		r.routesDirty[p.Service] = struct{}{}
		objs := r.routeClaims[p.Service]
		switch {
		case add && objs == nil:
			r.routeClaims[p.Service] = map[routes.Key]struct{}{key: {}}
		case add:
			objs[key] = struct{}{}
		default:
			delete(objs, key)
			if len(objs) == 0 {
				delete(r.routeClaims, p.Service)
			}
		}
	}
}

// planned returns the objects whose plan may have changed: those naming
// a dirty parent, and, so that each of their parents is decided among
// all its objects, every object naming one of their parents, and so on.
// With routesAll, every object.
func (r *Reflector) planned() (objs []*routes.Object, parents map[lb.ServiceName]struct{}) {
	parents = r.routesDirty
	if r.routesAll {
		for parent := range r.routesApplied {
			parents[parent] = struct{}{}
		}
		for parent := range r.routeClaims {
			parents[parent] = struct{}{}
		}
		return slices.Collect(maps.Values(r.routeObjs)), parents
	}
	seen := map[routes.Key]struct{}{}
	queue := slices.Collect(maps.Keys(parents))
	for len(queue) > 0 {
		parent := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for key := range r.routeClaims[parent] {
			if _, ok := seen[key]; ok {
				continue
			}
			seen[key] = struct{}{}
			o := r.routeObjs[key]
			objs = append(objs, o)
			for _, p := range o.Parents {
				if _, ok := parents[p.Service]; !ok {
					parents[p.Service] = struct{}{}
					queue = append(queue, p.Service)
				}
			}
		}
	}
	return objs, parents
}

// prepareRoutes returns the calls that bring the routes of the parents
// whose objects changed up to date (every parent's when a grant changed:
// routesAll), reports each object's new problems once, and clears the
// routes of parents no object splits any more. A plan of some objects
// decides their parents as the whole plan would (planned takes every
// object of those parents), so one route's change costs that route's
// plan, not every route's.
func (r *Reflector) prepareRoutes(call func(func(statedb.WriteTxn))) {
	objs, parents := r.planned()
	plan := routes.MakePlan(objs, slices.Collect(maps.Values(r.grants)), r.as)
	for _, st := range plan.Status {
		for _, p := range st.Problems {
			if !slices.Contains(r.routeProblems[st.Key], p) {
				r.fail(errors.New(st.Key.String() + ": " + p))
			}
		}
		r.routeProblems[st.Key] = st.Problems
	}
	gone := r.routesGone
	for key := range gone {
		delete(r.routeProblems, key)
	}
	if tbl := r.statusTable; tbl != nil {
		all := r.routesAll
		call(func(txn statedb.WriteTxn) {
			for key := range gone {
				_, _, err := tbl.Delete(txn, &routes.Status{Source: r.as, Key: key})
				r.check(err, key.String())
			}
			if all { // rows of objects this source no longer holds, from an earlier run
				for old := range tbl.All(txn) {
					if _, ok := r.routeObjs[old.Key]; old.Source == r.as && !ok {
						_, _, err := tbl.Delete(txn, old)
						r.check(err, old.Key.String())
					}
				}
			}
			for i := range plan.Status {
				_, _, err := tbl.Insert(txn, &plan.Status[i])
				r.check(err, plan.Status[i].Key.String())
			}
		})
	}
	for _, parent := range slices.SortedFunc(maps.Keys(parents), lb.ServiceName.Compare) {
		next, applied := plan.Routes[parent], r.routesApplied[parent]
		if slices.EqualFunc(next, applied, lb.Route.Equal) {
			continue // as applied: a parent of the plan whose routes stay
		}
		for _, old := range applied {
			if !slices.ContainsFunc(next, func(n lb.Route) bool { return n.Port == old.Port }) {
				call(func(txn statedb.WriteTxn) { r.check(r.w.ClearRoute(txn, parent, r.as, old.Port), parent.String()) })
			}
		}
		for _, rt := range next {
			call(func(txn statedb.WriteTxn) { r.check(r.w.SetRoute(txn, parent, rt), parent.String()) })
		}
		if len(next) == 0 {
			delete(r.routesApplied, parent)
		} else {
			r.routesApplied[parent] = next
		}
	}
	r.routesDirty, r.routesGone, r.routesAll = map[lb.ServiceName]struct{}{}, map[routes.Key]struct{}{}, false
	counts := map[string]int{}
	for key := range r.routeObjs {
		counts[key.Kind]++
	}
	for _, res := range routes.Resources {
		kind := strings.ToLower(res.Kind) + "s"
		if res.Kind == "ReferenceGrant" {
			r.src.SetObjects(kind, len(r.grants))
		} else {
			r.src.SetObjects(kind, counts[res.Kind])
		}
	}
}

// sweepRoutes returns the call that clears the routes this source set
// before (a run that started over) on services its plan no longer
// routes: SweepSource keeps what it set on services it still declares.
func (r *Reflector) sweepRoutes(call func(func(statedb.WriteTxn))) {
	applied := make(map[lb.ServiceName][]uint16, len(r.routesApplied))
	for parent, rs := range r.routesApplied {
		for _, rt := range rs {
			applied[parent] = append(applied[parent], rt.Port)
		}
	}
	call(func(txn statedb.WriteTxn) {
		type stale struct {
			name lb.ServiceName
			port uint16
		}
		var gone []stale
		for s := range r.w.Services().All(txn) {
			for _, rt := range s.Routes() {
				if rt.Source == r.as && !slices.Contains(applied[s.Name], rt.Port) {
					gone = append(gone, stale{s.Name, rt.Port})
				}
			}
		}
		for _, g := range gone {
			r.check(r.w.ClearRoute(txn, g.name, r.as, g.port), g.name.String())
		}
	})
}

// PublishRouteStatus makes the reflector keep a status row per route in
// tbl (routes.Cell's), written in the transaction that applies the
// routes. Call it before Run.
func (r *Reflector) PublishRouteStatus(tbl statedb.RWTable[*routes.Status]) { r.statusTable = tbl }
