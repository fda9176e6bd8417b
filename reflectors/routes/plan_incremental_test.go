package routes

import (
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cilium/statedb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/tables"
)

// The controller plans only the parents whose objects changed (and the
// objects those parents share), yet after each of 200 random batches of
// route changes, deletions and grant changes, over routes with one or two
// parents, ports and competing creation times, the routes on every
// parent and every status row are those of the whole plan.
func TestIncrementalRoutePlanMatchesTheWholePlan(t *testing.T) {
	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	status, err := NewStatusTable(db)
	if err != nil {
		t.Fatal(err)
	}
	src, err := reflectors.NewSourceAs(w, "k8s-routes", lb.SourceK8s, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := NewController(src, lb.SourceK8s, status)
	var batch []reflectors.Event
	push := func(obj any, deleted bool) { batch = append(batch, reflectors.Event{Obj: obj, Deleted: deleted}) }

	rng := rand.New(rand.NewPCG(7, 7))
	parents := []string{"p0", "p1", "p2", "p3"}
	objs := map[Key]*Object{}
	var grant *ReferenceGrant
	grantObj := &gwv1beta1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "g"},
		Spec: gwv1beta1.ReferenceGrantSpec{
			From: []gwv1beta1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "TCPRoute", Namespace: "default"}},
			To:   []gwv1beta1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
		},
	}
	randomRoute := func(name string) *gwv1.TCPRoute {
		rt := &gwv1.TCPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name,
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1+rng.IntN(3), 0, 0, 0, 0, time.UTC))}}
		for _, p := range rng.Perm(len(parents))[:1+rng.IntN(2)] {
			pref := gwv1.ParentReference{Group: ptrTo(gwv1.Group("")), Kind: ptrTo(gwv1.Kind("Service")), Name: gwv1.ObjectName(parents[p])}
			if rng.IntN(2) == 0 {
				pref.Port = ptrTo(gwv1.PortNumber(80))
			}
			rt.Spec.ParentRefs = append(rt.Spec.ParentRefs, pref)
		}
		var refs []gwv1.BackendRef
		for b := range 1 + rng.IntN(2) {
			ref := gwv1.BackendRef{Weight: ptrTo(int32(rng.IntN(5))), BackendObjectReference: gwv1.BackendObjectReference{
				Name: gwv1.ObjectName(fmt.Sprintf("b%d", b+rng.IntN(3))), Port: ptrTo(gwv1.PortNumber(80))}}
			if rng.IntN(4) == 0 {
				ref.Namespace = ptrTo(gwv1.Namespace("other"))
			}
			refs = append(refs, ref)
		}
		rt.Spec.Rules = []gwv1.TCPRouteRule{{BackendRefs: refs}}
		return rt
	}

	for step := range 200 {
		for range 1 + rng.IntN(3) {
			switch op := rng.IntN(10); {
			case op < 6:
				rt := randomRoute(fmt.Sprintf("r%d", rng.IntN(8)))
				o, err := Read(rt)
				if err != nil {
					t.Fatal(err)
				}
				objs[o.Key] = o
				push(rt, false)
			case op < 9:
				name := fmt.Sprintf("r%d", rng.IntN(8))
				delete(objs, Key{Kind: "TCPRoute", Namespace: "default", Name: name})
				push(&gwv1.TCPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}, true)
			case grant == nil:
				if grant, err = ReadGrant(grantObj); err != nil {
					t.Fatal(err)
				}
				push(grantObj, false)
			default:
				grant = nil
				push(grantObj, true)
			}
		}
		if err := c.apply(batch); err != nil {
			t.Fatal(err)
		}
		batch = nil

		var grants []*ReferenceGrant
		if grant != nil {
			grants = append(grants, grant)
		}
		want := MakePlan(slices.Collect(maps.Values(objs)), grants, lb.SourceK8s)
		txn := db.ReadTxn()
		for _, p := range parents {
			name := lb.NewServiceName("default", p)
			var got []lb.Route
			if svc, _, ok := w.Services().Get(txn, tables.ServiceByName.Query(name)); ok {
				got = svc.Routes()
			}
			byPort := func(a, b lb.Route) int { return int(a.Port) - int(b.Port) }
			got, wantRoutes := slices.SortedFunc(slices.Values(got), byPort), slices.SortedFunc(slices.Values(want.Routes[name]), byPort)
			if !slices.EqualFunc(got, wantRoutes, lb.Route.Equal) {
				t.Fatalf("step %d: routes on %s\n%v\nwant (the whole plan)\n%v", step, name, got, wantRoutes)
			}
		}
		rows := statedb.Collect(status.All(txn))
		if len(rows) != len(want.Status) {
			t.Fatalf("step %d: %d status rows, want %d", step, len(rows), len(want.Status))
		}
		for _, st := range want.Status {
			row, _, ok := status.Get(txn, StatusByKey.Query(lb.SourceK8s.String()+"/"+st.Kind+"/"+st.Namespace+"/"+st.Name))
			if !ok || !slices.Equal(row.Parents, st.Parents) || !slices.Equal(row.Shares, st.Shares) || !slices.Equal(row.Problems, st.Problems) ||
				!reflect.DeepEqual(row.ParentRefs, st.ParentRefs) || !slices.Equal(row.BackendRefs, st.BackendRefs) {
				t.Fatalf("step %d: status of %s\n%+v\nwant (the whole plan)\n%+v", step, st.Key, row, st)
			}
		}
	}
}

// ptrTo returns a pointer to v.
func ptrTo[T any](v T) *T { return &v }
