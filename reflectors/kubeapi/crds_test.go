package kubeapi

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/lbstate/lbstate/internal/syncbuf"
	"k8s.io/client-go/tools/cache"
)

// The kinds of these tests: widgets in example.com v2 (preferred) or v1,
// and gadgets in v1.
var (
	widgetV2 = schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "widgets"}
	widgetV1 = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	gadgetV1 = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}
)

// recorder is a kind's handler: it keeps what it was told exists.
type recorder struct {
	mu      sync.Mutex
	held    map[string]string // key: the apiVersion it came in
	deletes []string          // keys, in order
	tombs   int               // deletes that came as tombstones
}

func newRecorder() *recorder { return &recorder{held: map[string]string{}} }

func (r *recorder) OnAdd(obj any, _ bool) { r.OnUpdate(nil, obj) }
func (r *recorder) OnUpdate(_, obj any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	u := obj.(*unstructured.Unstructured)
	r.held[u.GetNamespace()+"/"+u.GetName()] = u.GetAPIVersion()
}

func (r *recorder) OnDelete(obj any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
		r.tombs++
	}
	u := obj.(*unstructured.Unstructured)
	key := u.GetNamespace() + "/" + u.GetName()
	delete(r.held, key)
	r.deletes = append(r.deletes, key)
}

// holds returns what the recorder holds, "key@apiVersion" sorted.
func (r *recorder) holds() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, key := range slices.Sorted(maps.Keys(r.held)) {
		out = append(out, key+"@"+r.held[key])
	}
	return strings.Join(out, " ")
}

func newFakeDynamic(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	kinds := maps.Clone(CRDListKinds)
	kinds[widgetV1], kinds[widgetV2], kinds[gadgetV1] = "WidgetList", "WidgetList", "GadgetList"
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), kinds, objs...)
}

func object(gvr schema.GroupVersionResource, kind, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(gvr.GroupVersion().String())
	u.SetKind(kind)
	u.SetNamespace("ns")
	u.SetName(name)
	return u
}

// crdsTest is a running CRDs of widgets and gadgets.
type crdsTest struct {
	crds            *CRDs
	widgets, gadget *recorder
	log             *syncbuf.Buffer
}

func runCRDs(t *testing.T, dyn *dynamicfake.FakeDynamicClient, disco Discovery, configure ...func(*CRDs)) *crdsTest {
	t.Helper()
	ct := &crdsTest{widgets: newRecorder(), gadget: newRecorder(), log: &syncbuf.Buffer{}}
	crds, err := NewCRDs(dyn, disco, slog.New(slog.NewTextHandler(ct.log, nil)),
		Kind{Name: "Widget", Versions: []schema.GroupVersionResource{widgetV2, widgetV1}, Handler: ct.widgets},
		Kind{Name: "Gadget", Versions: []schema.GroupVersionResource{gadgetV1}, Handler: ct.gadget},
	)
	if err != nil {
		t.Fatal(err)
	}
	crds.DiscoveryInterval = 10 * time.Millisecond
	for _, f := range configure {
		f(crds)
	}
	ct.crds = crds
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { crds.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return ct
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 10s", what)
		}
	}
}

func watching(c *CRDs, kind string) string {
	gvr, ok := c.Watching(kind)
	if !ok {
		return "nothing"
	}
	return gvr.Version
}

func createCRD(t *testing.T, dyn *dynamicfake.FakeDynamicClient, crd *unstructured.Unstructured) {
	t.Helper()
	if _, err := dyn.Resource(CRDResource).Create(context.Background(), crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func updateCRD(t *testing.T, dyn *dynamicfake.FakeDynamicClient, crd *unstructured.Unstructured) {
	t.Helper()
	if _, err := dyn.Resource(CRDResource).Update(context.Background(), crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func deleteCRD(t *testing.T, dyn *dynamicfake.FakeDynamicClient, gvr schema.GroupVersionResource) {
	t.Helper()
	if err := dyn.Resource(CRDResource).Delete(context.Background(), gvr.Resource+"."+gvr.Group, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func create(t *testing.T, dyn *dynamicfake.FakeDynamicClient, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) {
	t.Helper()
	if _, err := dyn.Resource(gvr).Namespace(obj.GetNamespace()).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Without CRDs the kinds do not hold up the initial sync: one line names
// them, and nothing lists their resources.
func TestKindsWithoutCRDsCountAsSynced(t *testing.T) {
	dyn := newFakeDynamic()
	ct := runCRDs(t, dyn, nil)
	eventually(t, "synced", ct.crds.HasSynced)
	if n := strings.Count(ct.log.String(), "CRDs not installed"); n != 1 || !strings.Contains(ct.log.String(), "kinds=Widget,Gadget") {
		t.Errorf("%d lines about the missing CRDs, want 1 naming Widget,Gadget:\n%s", n, ct.log)
	}
	for _, a := range dyn.Actions() {
		if a.GetResource() != CRDResource {
			t.Errorf("%s of %s without its CRD", a.GetVerb(), a.GetResource())
		}
	}
}

// A CRD created after start is watched once it is Established, not
// before; its objects are then handed over, and one line says so.
func TestKindIsWatchedOnceItsCRDIsEstablished(t *testing.T) {
	dyn := newFakeDynamic(object(widgetV1, "Widget", "w1"))
	ct := runCRDs(t, dyn, nil)
	eventually(t, "synced", ct.crds.HasSynced)

	createCRD(t, dyn, CRDObject(widgetV1, "Widget", false, "v1"))
	// Gadget's CRD, after Widget's, tells when Widget's has been seen.
	createCRD(t, dyn, CRDObject(gadgetV1, "Gadget", true, "v1"))
	eventually(t, "gadgets watched", func() bool { return watching(ct.crds, "Gadget") == "v1" })
	if got := watching(ct.crds, "Widget"); got != "nothing" {
		t.Errorf("widgets watched in %s before their CRD is Established", got)
	}

	updateCRD(t, dyn, CRDObject(widgetV1, "Widget", true, "v1"))
	eventually(t, "the widget handed over", func() bool { return ct.widgets.holds() == "ns/w1@example.com/v1" })
	if got := watching(ct.crds, "Widget"); got != "v1" {
		t.Errorf("watching widgets in %s, want v1", got)
	}
	if n := strings.Count(ct.log.String(), "CRD installed"); n != 2 {
		t.Errorf("%d lines about installed CRDs, want 2 (Widget, Gadget):\n%s", n, ct.log)
	}
}

// Synced waits for the kinds whose CRDs are there at start: their
// objects are all handed over when it says so.
func TestSyncedWaitsForKindsWhoseCRDsArePresentAtStart(t *testing.T) {
	dyn := newFakeDynamic(CRDObject(widgetV1, "Widget", true, "v1"),
		object(widgetV1, "Widget", "w1"), object(widgetV1, "Widget", "w2"))
	listing, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	dyn.PrependReactor("list", "widgets", func(k8stesting.Action) (bool, runtime.Object, error) {
		once.Do(func() { close(listing) })
		<-release
		return false, nil, nil
	})
	ct := runCRDs(t, dyn, nil)
	<-listing
	time.Sleep(20 * time.Millisecond) // room for a wrong sync to show
	if ct.crds.HasSynced() {
		t.Error("synced while the widgets are being listed")
	}
	close(release)
	eventually(t, "synced", ct.crds.HasSynced)
	if got := ct.widgets.holds(); got != "ns/w1@example.com/v1 ns/w2@example.com/v1" {
		t.Errorf("synced holding %q, want both widgets", got)
	}
}

// A CRD deleted, or serving no version read any more, stops its kind's
// informer and takes its objects away (a fake API server, unlike a real
// one, does not delete them first); a CRD back brings them back.
func TestKindStopsAndItsObjectsGoWhenItsCRDGoes(t *testing.T) {
	dyn := newFakeDynamic(CRDObject(widgetV1, "Widget", true, "v1"),
		object(widgetV1, "Widget", "w1"), object(widgetV1, "Widget", "w2"))
	ct := runCRDs(t, dyn, nil)
	eventually(t, "synced", ct.crds.HasSynced)
	if got := ct.widgets.holds(); got != "ns/w1@example.com/v1 ns/w2@example.com/v1" {
		t.Fatalf("holding %q, want both widgets", got)
	}

	deleteCRD(t, dyn, widgetV1)
	eventually(t, "widgets not watched", func() bool { return watching(ct.crds, "Widget") == "nothing" })
	if got := ct.widgets.holds(); got != "" {
		t.Errorf("holding %q after the CRD went, want nothing", got)
	}
	ct.widgets.mu.Lock()
	if ct.widgets.tombs != 2 {
		t.Errorf("%d tombstones, want 2", ct.widgets.tombs)
	}
	ct.widgets.mu.Unlock()

	createCRD(t, dyn, CRDObject(widgetV1, "Widget", true, "v1"))
	eventually(t, "widgets back", func() bool { return ct.widgets.holds() == "ns/w1@example.com/v1 ns/w2@example.com/v1" })

	updateCRD(t, dyn, CRDObject(widgetV1, "Widget", true, "v0"))
	eventually(t, "widgets not watched", func() bool { return watching(ct.crds, "Widget") == "nothing" })
	if got := ct.widgets.holds(); got != "" {
		t.Errorf("holding %q once the CRD serves only v0, want nothing", got)
	}
	if n := strings.Count(ct.log.String(), "CRD removed or serving no version read here"); n != 2 {
		t.Errorf("%d lines about the CRD gone, want 2:\n%s", n, ct.log)
	}
}

// When the CRD starts serving a preferred version, the kind moves there:
// the objects it lists replace the old version's without a delete in
// between, and those it does not list are deleted.
func TestKindMovesToAPreferredVersionWhenServed(t *testing.T) {
	dyn := newFakeDynamic(CRDObject(widgetV1, "Widget", true, "v1"),
		object(widgetV1, "Widget", "a"), object(widgetV1, "Widget", "b"))
	ct := runCRDs(t, dyn, nil)
	eventually(t, "synced", ct.crds.HasSynced)

	// A fake keeps each version apart; an API server converts.
	create(t, dyn, widgetV2, object(widgetV2, "Widget", "a"))
	create(t, dyn, widgetV2, object(widgetV2, "Widget", "c"))
	updateCRD(t, dyn, CRDObject(widgetV1, "Widget", true, "v1", "v2"))
	eventually(t, "v2's widgets", func() bool { return ct.widgets.holds() == "ns/a@example.com/v2 ns/c@example.com/v2" })
	if got := watching(ct.crds, "Widget"); got != "v2" {
		t.Errorf("watching %s, want v2", got)
	}
	ct.widgets.mu.Lock()
	deletes := slices.Clone(ct.widgets.deletes)
	ct.widgets.mu.Unlock()
	if !slices.Equal(deletes, []string{"ns/b"}) {
		t.Errorf("deletes %v, want only ns/b (a stays throughout)", deletes)
	}

	// Back to v1 only: the v1 objects again.
	updateCRD(t, dyn, CRDObject(widgetV1, "Widget", true, "v1"))
	eventually(t, "v1's widgets", func() bool { return ct.widgets.holds() == "ns/a@example.com/v1 ns/b@example.com/v1" })
}

// A kind the agent may not list (RBAC) does not hold up the initial
// sync: one line says so, its errors reach WatchErrorHandler, and its
// objects come once it may list them.
func TestForbiddenKindDoesNotHoldUpSync(t *testing.T) {
	dyn := newFakeDynamic(CRDObject(widgetV1, "Widget", true, "v1"), object(widgetV1, "Widget", "w1"))
	var (
		mu        sync.Mutex
		forbidden = true
		errs      int
	)
	dyn.PrependReactor("list", "widgets", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if forbidden {
			return true, nil, apierrors.NewForbidden(widgetV1.GroupResource(), "", errors.New("RBAC says no"))
		}
		return false, nil, nil
	})
	ct := runCRDs(t, dyn, nil, func(c *CRDs) {
		c.WatchErrorHandler = func(context.Context, *cache.Reflector, error) {
			mu.Lock()
			defer mu.Unlock()
			errs++
		}
	})
	eventually(t, "synced", ct.crds.HasSynced)
	if got := ct.widgets.holds(); got != "" {
		t.Errorf("holding %q while the agent may not list widgets", got)
	}
	mu.Lock()
	forbidden = false
	if errs == 0 {
		t.Error("no watch error passed on to WatchErrorHandler")
	}
	mu.Unlock()
	eventually(t, "the widget handed over", func() bool { return ct.widgets.holds() == "ns/w1@example.com/v1" })
	if n := strings.Count(ct.log.String(), "Not allowed to list a CRD-backed kind"); n != 1 || !strings.Contains(ct.log.String(), "kind=Widget") {
		t.Errorf("%d lines about the forbidden kind, want 1 naming Widget:\n%s", n, ct.log)
	}
}
