package routestatus

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/statedb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors/routes"
	"github.com/lbstate/lbstate/tables"
)

// harness is one agent's tables, filled as the Kubernetes source fills
// them (routes.Read and routes.MakePlan over every route, rows in the
// routes table; services declared through the Writer), and a fake API
// server's routes.
type harness struct {
	t      *testing.T
	db     *statedb.DB
	w      *tables.Writer
	status statedb.RWTable[*routes.Status]
	dyn    *dynamicfake.FakeDynamicClient
	objs   map[routes.Key]*routes.Object
	grants []*routes.ReferenceGrant
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	status, err := routes.NewStatusTable(db)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, db: db, w: w, status: status,
		dyn:  dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), routes.ResourceList),
		objs: map[routes.Key]*routes.Object{}}
}

// service declares Service ns/name, as the Kubernetes source would.
func (h *harness) service(ns, name string) {
	h.t.Helper()
	txn := h.w.WriteTxn()
	defer txn.Abort()
	if err := h.w.UpsertService(txn, lb.ServiceParams{Name: lb.NewServiceName(ns, name), Source: lb.SourceK8s}); err != nil {
		h.t.Fatal(err)
	}
	txn.Commit()
}

// route creates (or updates) rt in the API and plans it with every other
// route into the routes table.
func (h *harness) route(rt *gwv1.HTTPRoute) {
	h.t.Helper()
	rt = rt.DeepCopy()
	rt.APIVersion, rt.Kind = gwv1.GroupVersion.String(), "HTTPRoute"
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rt)
	if err != nil {
		h.t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	gvr := routes.Resources[0].Versions[0]
	res := h.dyn.Resource(gvr).Namespace(rt.Namespace)
	if _, err := res.Get(context.Background(), rt.Name, metav1.GetOptions{}); err == nil {
		_, err = res.Update(context.Background(), u, metav1.UpdateOptions{})
	} else {
		_, err = res.Create(context.Background(), u, metav1.CreateOptions{})
	}
	if err != nil {
		h.t.Fatal(err)
	}
	o, err := routes.Read(rt)
	if err != nil {
		h.t.Fatal(err)
	}
	h.objs[o.Key] = o
	h.plan()
}

// grant adds a ReferenceGrant in ns from HTTPRoutes in from.
func (h *harness) grant(ns, from string) {
	h.grants = append(h.grants, &routes.ReferenceGrant{Namespace: ns, Name: "g",
		From: []gwv1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: gwv1.Namespace(from)}},
		To:   []gwv1.ReferenceGrantTo{{Kind: "Service"}}})
	h.plan()
}

func (h *harness) plan() {
	plan := routes.MakePlan(slices.Collect(maps.Values(h.objs)), h.grants, lb.SourceK8s)
	txn := h.db.WriteTxn(h.status)
	for i := range plan.Status {
		if _, _, err := h.status.Insert(txn, &plan.Status[i]); err != nil {
			h.t.Fatal(err)
		}
	}
	txn.Commit()
}

// writer returns a writer of h's tables through dyn (h's API when nil).
func (h *harness) writer(identity string, dyn dynamic.Interface) *Writer {
	if dyn == nil {
		dyn = h.dyn
	}
	cfg := DefaultConfig
	cfg.RouteStatusIdentity = identity
	cfg.RouteStatusLeaseDuration = time.Second
	cfg.RouteStatusQPS, cfg.RouteStatusBurst = 1000, 1000
	return NewWriter(Params{Config: cfg, DB: h.db, Routes: h.status, Services: h.w.Services(), Dynamic: dyn,
		Source: lb.SourceK8s, Log: slog.New(slog.DiscardHandler)})
}

// lead runs w.Lead until the test ends.
func (h *harness) lead(w *Writer) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Lead(ctx) }()
	h.t.Cleanup(func() { cancel(); <-done })
}

// parents returns route ns/name's status.parents in the API.
func (h *harness) parents(ns, name string) []gwv1.RouteParentStatus {
	h.t.Helper()
	u, err := h.dyn.Resource(routes.Resources[0].Versions[0]).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	ps, err := parentsOf(u)
	if err != nil {
		h.t.Fatal(err)
	}
	return ps
}

// updates counts the status updates of route ns/name the API received.
func (h *harness) updates(ns, name string) int {
	n := 0
	for _, a := range h.dyn.Actions() {
		if u, ok := a.(k8stesting.UpdateAction); ok && a.GetSubresource() == "status" && a.GetNamespace() == ns &&
			u.GetObject().(*unstructured.Unstructured).GetName() == name {
			n++
		}
	}
	return n
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// countingClient counts the status updates made through it.
type countingClient struct {
	dynamic.Interface
	n *atomic.Int64
}

func (c countingClient) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return countingResource{c.Interface.Resource(gvr), c.n}
}

type countingResource struct {
	dynamic.NamespaceableResourceInterface
	n *atomic.Int64
}

func (r countingResource) Namespace(ns string) dynamic.ResourceInterface {
	return countingNamespace{r.NamespaceableResourceInterface.Namespace(ns), r.n}
}

type countingNamespace struct {
	dynamic.ResourceInterface
	n *atomic.Int64
}

func (r countingNamespace) UpdateStatus(ctx context.Context, u *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	r.n.Add(1)
	return r.ResourceInterface.UpdateStatus(ctx, u, opts)
}

// httpRoute is route ns/name at generation gen on Service parents
// (parentRefs to Services) splitting to backends (backendRefs).
func httpRoute(ns, name string, gen int64, parents []gwv1.ParentReference, backends ...gwv1.HTTPBackendRef) *gwv1.HTTPRoute {
	return &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: gen,
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: parents},
			Rules:           []gwv1.HTTPRouteRule{{BackendRefs: backends}},
		},
	}
}

func serviceParent(name string) gwv1.ParentReference {
	return gwv1.ParentReference{Group: ptr(gwv1.Group("")), Kind: ptr(gwv1.Kind("Service")), Name: gwv1.ObjectName(name)}
}

func backend(ns, name string) gwv1.HTTPBackendRef {
	ref := gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
		Name: gwv1.ObjectName(name), Port: ptr(gwv1.PortNumber(80))}}}
	if ns != "" {
		ref.Namespace = ptr(gwv1.Namespace(ns))
	}
	return ref
}

func ptr[T any](v T) *T { return &v }
