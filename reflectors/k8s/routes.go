package k8s

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/cilium/statedb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors/routes"
)

// The reflector applies traffic splits (Gateway API routes on Services,
// SMI TrafficSplits) as lb.Routes on their parent Services, from the
// objects' last valid versions and the ReferenceGrants.

// prepareRouteObject records a route, split or grant. An invalid update
// is reported and leaves the last valid version in force.
func (r *Reflector) prepareRouteObject(key routes.Key, obj any, deleted bool) {
	if deleted {
		delete(r.routeObjs, key)
		delete(r.grants, key)
		return
	}
	if key.Kind == "ReferenceGrant" {
		g, err := routes.ReadGrant(obj)
		if err != nil {
			r.fail(err)
			return
		}
		r.grants[key] = g
		return
	}
	o, err := routes.Read(obj)
	if err != nil {
		r.fail(err)
		return
	}
	r.routeObjs[key] = o
}

// prepareRoutes returns the calls that bring every parent's routes up to
// date, reports each object's new problems once, and clears the routes
// of parents no object splits any more.
func (r *Reflector) prepareRoutes(call func(func(statedb.WriteTxn))) {
	objs := slices.Collect(maps.Values(r.routeObjs))
	grants := slices.Collect(maps.Values(r.grants))
	plan := routes.MakePlan(objs, grants, r.as)
	reported := make(map[routes.Key][]string, len(plan.Status))
	for _, st := range plan.Status {
		for _, p := range st.Problems {
			if !slices.Contains(r.routeProblems[st.Key], p) {
				r.fail(errors.New(st.Key.String() + ": " + p))
			}
		}
		reported[st.Key] = st.Problems
	}
	r.routeProblems = reported
	if tbl := r.statusTable; tbl != nil {
		rows := make([]*routes.Status, len(plan.Status))
		for i := range plan.Status {
			rows[i] = &plan.Status[i]
		}
		call(func(txn statedb.WriteTxn) {
			for old := range tbl.All(txn) {
				if old.Source == r.as && !slices.ContainsFunc(rows, func(s *routes.Status) bool { return s.Key == old.Key }) {
					_, _, err := tbl.Delete(txn, old)
					r.check(err, old.Key.String())
				}
			}
			for _, row := range rows {
				_, _, err := tbl.Insert(txn, row)
				r.check(err, row.Key.String())
			}
		})
	}
	for _, parent := range slices.SortedFunc(maps.Keys(r.routesApplied), lb.ServiceName.Compare) {
		next := plan.Routes[parent]
		for _, old := range r.routesApplied[parent] {
			if !slices.ContainsFunc(next, func(n lb.Route) bool { return n.Port == old.Port }) {
				call(func(txn statedb.WriteTxn) { r.check(r.w.ClearRoute(txn, parent, r.as, old.Port), parent.String()) })
			}
		}
	}
	for _, parent := range slices.SortedFunc(maps.Keys(plan.Routes), lb.ServiceName.Compare) {
		if slices.EqualFunc(plan.Routes[parent], r.routesApplied[parent], lb.Route.Equal) {
			continue // as applied: most batches change one route of many
		}
		for _, rt := range plan.Routes[parent] {
			call(func(txn statedb.WriteTxn) { r.check(r.w.SetRoute(txn, parent, rt), parent.String()) })
		}
	}
	r.routesApplied = plan.Routes
	counts := map[string]int{}
	for key := range r.routeObjs {
		counts[strings.ToLower(key.Kind)+"s"]++
	}
	for _, res := range routes.Resources {
		kind := strings.ToLower(res.Kind) + "s"
		if res.Kind == "ReferenceGrant" {
			r.src.SetObjects(kind, len(r.grants))
		} else {
			r.src.SetObjects(kind, counts[kind])
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
			for _, rt := range s.Routes {
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

// routeInformers returns an informer for each route kind the API server
// serves (in the first version of routes.Resources it serves). The kinds
// without their CRDs are logged in one line and skipped: their objects
// stay off until the agent restarts.
func (r *Reflector) routeInformers(ctx context.Context, dyn dynamic.Interface) (dynamicinformer.DynamicSharedInformerFactory, []cache.SharedIndexInformer, error) {
	f := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	var (
		infs    []cache.SharedIndexInformer
		missing []string
	)
	for _, res := range routes.Resources {
		served := false
		for _, gvr := range res.Versions {
			_, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, nil, err
			}
			infs = append(infs, f.ForResource(gvr).Informer())
			served = true
			break
		}
		if !served {
			missing = append(missing, res.Kind)
		}
	}
	if len(missing) > 0 {
		r.src.Log().Info("Route CRDs not installed: their objects are off", slog.String("kinds", strings.Join(missing, ",")))
	}
	return f, infs, nil
}

// routeHandler pushes route objects read from unstructured ones.
func (r *Reflector) routeHandler() cache.ResourceEventHandler {
	return r.unstructuredHandler(func(u *unstructured.Unstructured, _ bool) (any, error) {
		return routes.FromUnstructured(u)
	})
}
