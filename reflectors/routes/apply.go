package routes

import (
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors/kubeapi"
	"github.com/lbstate/lbstate/tables"
)

// The controller applies traffic splits (Gateway API routes on Services,
// SMI TrafficSplits) as lb.Routes on their parent Services, from the
// objects' last valid versions and the ReferenceGrants.

// prepareRouteObject records a route, split or grant. An invalid update
// is reported and leaves the last valid version in force.
func (c *Controller) prepareRouteObject(key Key, obj any, deleted bool) {
	if key.Kind == "ReferenceGrant" {
		c.all = true // a grant may change any object's refs
		if deleted {
			delete(c.grants, key)
			return
		}
		g, err := ReadGrant(obj)
		if err != nil {
			c.fail(kubeapi.AtOrigin(obj, err))
			return
		}
		c.grants[key] = g
		return
	}
	var o *Object
	if !deleted {
		var err error
		if o, err = Read(obj); err != nil {
			c.fail(kubeapi.AtOrigin(obj, err))
			return
		}
	}
	if old := c.objs[key]; old != nil {
		c.claim(key, old, false)
	}
	if o == nil {
		delete(c.objs, key)
		c.gone[key] = struct{}{}
		return
	}
	c.objs[key] = o
	c.claim(key, o, true)
}

// claim records (add) or forgets that o, under key, names its parents,
// and marks them for planning.
func (c *Controller) claim(key Key, o *Object, add bool) {
	for _, p := range o.Parents {
		c.dirty[p.Service] = struct{}{}
		objs := c.claims[p.Service]
		switch {
		case add && objs == nil:
			c.claims[p.Service] = map[Key]struct{}{key: {}}
		case add:
			objs[key] = struct{}{}
		default:
			delete(objs, key)
			if len(objs) == 0 {
				delete(c.claims, p.Service)
			}
		}
	}
}

// planned returns the objects whose plan may have changed: those naming
// a dirty parent, and, so that each of their parents is decided among
// all its objects, every object naming one of their parents, and so on.
// With routesAll, every object.
func (c *Controller) planned() (objs []*Object, parents map[lb.ServiceName]struct{}) {
	parents = c.dirty
	if c.all {
		for parent := range c.applied {
			parents[parent] = struct{}{}
		}
		for parent := range c.claims {
			parents[parent] = struct{}{}
		}
		return slices.Collect(maps.Values(c.objs)), parents
	}
	seen := map[Key]struct{}{}
	queue := slices.Collect(maps.Keys(parents))
	for len(queue) > 0 {
		parent := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for key := range c.claims[parent] {
			if _, ok := seen[key]; ok {
				continue
			}
			seen[key] = struct{}{}
			o := c.objs[key]
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
func (c *Controller) prepareRoutes(call func(func(statedb.WriteTxn))) {
	objs, parents := c.planned()
	plan := MakePlan(objs, slices.Collect(maps.Values(c.grants)), c.as)
	for _, st := range plan.Status {
		reported := make([]string, 0, len(st.Problems))
		for _, p := range st.Problems {
			id := p
			if parent, ok := plan.lost[st.Key][p]; ok {
				// A loss is the object's own state whoever wins: a
				// winner coming or going must not re-report every loser.
				id = "lost " + parent
			}
			if !slices.Contains(c.problems[st.Key], id) {
				c.fail(kubeapi.AtOriginOf(c.objs[st.Key].Origin, errors.New(st.Key.String()+": "+p)))
			}
			reported = append(reported, id)
		}
		c.problems[st.Key] = reported
	}
	gone := c.gone
	for key := range gone {
		if _, back := c.objs[key]; !back { // deleted and added again in one batch: as updated
			delete(c.problems, key)
		}
	}
	if tbl := c.table; tbl != nil {
		all := c.all
		call(func(txn statedb.WriteTxn) {
			for key := range gone {
				_, _, err := tbl.Delete(txn, &Status{Source: c.as, Key: key})
				c.check(err, key.String())
			}
			if all { // rows of objects this source no longer holds, from an earlier run
				for old := range tbl.All(txn) {
					if _, ok := c.objs[old.Key]; old.Source == c.as && !ok {
						_, _, err := tbl.Delete(txn, old)
						c.check(err, old.Key.String())
					}
				}
			}
			for i := range plan.Status {
				_, _, err := tbl.Insert(txn, &plan.Status[i])
				c.check(err, plan.Status[i].Key.String())
			}
		})
	}
	for _, parent := range slices.SortedFunc(maps.Keys(parents), lb.ServiceName.Compare) {
		next, applied := plan.Routes[parent], c.applied[parent]
		if slices.EqualFunc(next, applied, lb.Route.Equal) {
			continue // as applied: a parent of the plan whose routes stay
		}
		for _, old := range applied {
			if !slices.ContainsFunc(next, func(n lb.Route) bool { return n.Port == old.Port }) {
				cause := c.routeCause(old.Name, "removed")
				call(func(txn statedb.WriteTxn) {
					c.w.SetCause(txn, cause)
					c.check(c.w.ClearRoute(txn, parent, c.as, old.Port), parent.String())
				})
			}
		}
		for _, rt := range next {
			cause := c.routeCause(rt.Name, "")
			call(func(txn statedb.WriteTxn) {
				c.w.SetCause(txn, cause)
				c.check(c.w.SetRoute(txn, parent, rt), parent.String())
			})
		}
		if len(next) == 0 {
			delete(c.applied, parent)
		} else {
			c.applied[parent] = next
		}
	}
	c.dirty, c.gone, c.all = map[lb.ServiceName]struct{}{}, map[Key]struct{}{}, false
	counts := map[string]int{}
	for key := range c.objs {
		counts[key.Kind]++
	}
	for _, res := range Resources {
		kind := strings.ToLower(res.Kind) + "s"
		if res.Kind == "ReferenceGrant" {
			c.src.SetObjects(kind, len(c.grants))
		} else {
			c.src.SetObjects(kind, counts[res.Kind])
		}
	}
}

// sweepRoutes returns the call that clears the routes this source set
// before (a run that started over) on services its plan no longer
// routes: SweepSource keeps what it set on services it still declares.
func (c *Controller) sweepRoutes(call func(func(statedb.WriteTxn))) {
	applied := make(map[lb.ServiceName][]uint16, len(c.applied))
	for parent, rs := range c.applied {
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
		for s := range c.w.Services().All(txn) {
			for _, rt := range s.Routes() {
				if rt.Source == c.as && !slices.Contains(applied[s.Name], rt.Port) {
					gone = append(gone, stale{s.Name, rt.Port})
				}
			}
		}
		for _, g := range gone {
			c.check(c.w.ClearRoute(txn, g.name, c.as, g.port), g.name.String())
		}
	})
}

// routeCause is what the history says a route's write applies: the
// route's kind and namespace/name (lb.Route.Name, "HTTPRoute shop/web").
func (c *Controller) routeCause(name, detail string) *tables.Cause {
	kind, nsName, _ := strings.Cut(name, " ")
	ns, n, ok := strings.Cut(nsName, "/")
	if !ok {
		ns, n = "", nsName
	}
	return &tables.Cause{Source: c.as.String(), Kind: kind, Namespace: ns, Name: n, Detail: detail}
}
