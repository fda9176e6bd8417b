package k8s

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/reflectors/kubeapi"
	"github.com/lbstate/lbstate/reflectors/redirectpolicy"
	"github.com/lbstate/lbstate/reflectors/routes"
	"github.com/lbstate/lbstate/tables"
)

// syncedLog is a log the source writes from several goroutines.
type syncedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// policyTest sets up startPolicyReflector's reflector.
type policyTest struct {
	cidrs   []string      // --lrp-address-matcher-cidrs
	crdPoll time.Duration // how often a missing CRD is looked for (0: the default)
}

// policyRun is the services source, the redirect policies source and
// the routes source over one API feed, as a hive of kubeapi.Cell, Cell,
// redirectpolicy.Cell and routes.Cell runs them.
type policyRun struct {
	src allSources
	lrp struct {
		table statedb.RWTable[*redirectpolicy.Status]
	}
}

// allSources reports sources as one.
type allSources []*reflectors.Source

func (s allSources) IsSynced() bool {
	for _, src := range s {
		if !src.IsSynced() {
			return false
		}
	}
	return true
}

func (s allSources) Errors() (n uint64) {
	for _, src := range s {
		n += src.Errors()
	}
	return n
}

// startPolicyReflector runs the services source and the redirect
// policies source over client and dyn on node-1, logging into the
// returned log, keeping policy rows in r.lrp.table.
func startPolicyReflector(t *testing.T, client *fake.Clientset, dyn *dynamicfake.FakeDynamicClient, opts policyTest) (*policyRun, *tables.Writer, *statedb.DB, *syncedLog) {
	t.Helper()
	w, db, cfg := newTestTables(t, "node-1")
	log := &syncedLog{}
	logger := slog.New(slog.NewTextHandler(log, nil))
	src, err := reflectors.NewSource(w, lb.SourceK8s, logger, nil)
	if err != nil {
		t.Fatal(err)
	}
	psrc, err := reflectors.NewSourceAs(w, lb.SourceK8s.String()+"-redirect-policies", lb.SourceK8s, logger, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReflector(cfg, src, lb.SourceK8s)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := redirectpolicy.NewTable(db)
	if err != nil {
		t.Fatal(err)
	}
	popts, err := redirectpolicy.Config{LRPAddressMatcherCIDRs: opts.cidrs}.Options()
	if err != nil {
		t.Fatal(err)
	}
	c := redirectpolicy.NewController(popts, cfg.Node(), psrc, lb.SourceK8s, rows)
	rsrc, err := reflectors.NewSourceAs(w, lb.SourceK8s.String()+"-routes", lb.SourceK8s, logger, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc := routes.NewController(rsrc, lb.SourceK8s, nil)
	feed := kubeapi.NewAPIFeed(kubeapi.Clients{Client: client, Dynamic: dyn}, logger)
	if opts.crdPoll > 0 {
		feed.DiscoveryInterval = opts.crdPoll
	}
	feed.Want(redirectpolicy.Kinds(cfg.Node())...)
	feed.Want(routes.Kinds()...)
	feed.Want(Kinds(cfg)...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 3)
	go func() { done <- r.Run(ctx, r.Subscribe(feed)) }()
	go func() { done <- c.Run(ctx, c.Subscribe(feed)) }()
	go func() { done <- rc.Run(ctx, rc.Subscribe(feed)) }()
	t.Cleanup(func() {
		cancel()
		for range 3 {
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
		feed.Stop()
	})
	run := &policyRun{src: allSources{src, psrc, rsrc}}
	run.lrp.table = rows
	return run, w, db, log
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 10s", what)
		}
	}
}

// Without the CRDs the source still syncs, says so once, naming every
// CRD-backed kind, and does not ask about them again: a watch of a
// missing resource would fail forever. (The CRDs are watched instead.)
func TestPoliciesWithoutCRDSyncAndLogOnce(t *testing.T) {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), allResources())
	r, _, _, log := startPolicyReflector(t, fake.NewClientset(), dyn, policyTest{})
	eventually(t, "synced", r.src.IsSynced)
	calls := len(dyn.Actions())
	time.Sleep(100 * time.Millisecond) // room for a retry loop to show
	if n := strings.Count(log.String(), "CRDs not installed"); n != 1 || !strings.Contains(log.String(), strings.Join(append([]string{redirectpolicy.Kind}, routeKinds()...), ",")) {
		t.Errorf("%d log lines about the missing CRDs, want 1 naming %s and %v:\n%s", n, redirectpolicy.Kind, routeKinds(), log)
	}
	for _, a := range dyn.Actions() {
		if a.GetResource() != kubeapi.CRDResource {
			t.Errorf("%s of %s, whose CRD is missing", a.GetVerb(), a.GetResource())
		}
	}
	if n := len(dyn.Actions()); n != calls {
		t.Errorf("%d more calls to the API after the sync, want none: %v", n-calls, dyn.Actions()[calls:])
	}
}

func routeKinds() []string {
	var kinds []string
	for _, res := range routes.Resources {
		kinds = append(kinds, res.Kind)
	}
	return kinds
}

// A CRD installed after the agent started is picked up without a restart:
// while it is missing the source is synced and says so once; once it is
// Established (not before), one line says so, and its policies apply;
// nothing polls the API meanwhile.
func TestPolicyCRDInstalledLaterIsPickedUp(t *testing.T) {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), allResources())
	r, w, db, log := startPolicyReflector(t, fake.NewClientset(dnsPod()), dyn, policyTest{crdPoll: 10 * time.Millisecond})
	eventually(t, "synced", r.src.IsSynced)
	if n := strings.Count(log.String(), "CRDs not installed"); n != 1 {
		t.Errorf("%d log lines about the missing CRD, want 1:\n%s", n, log)
	}
	if r.src.Errors() != 0 {
		t.Errorf("%d errors counted while the CRD is missing, want none", r.src.Errors())
	}

	if _, err := dyn.Resource(redirectpolicy.Resource).Namespace("kube-system").Create(context.Background(), policyObject(t, "169.254.20.10"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crds := dyn.Resource(kubeapi.CRDResource)
	if _, err := crds.Create(context.Background(), kubeapi.CRDObject(redirectpolicy.Resource, redirectpolicy.Kind, false, redirectpolicy.Version), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := crds.Update(context.Background(), kubeapi.CRDObject(redirectpolicy.Resource, redirectpolicy.Kind, true, redirectpolicy.Version), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the policy applied", func() bool { return redirectedBackends(w, db, "169.254.20.10:53/UDP")() == "10.0.1.1:5353/UDP" })
	if n := strings.Count(log.String(), "CRD installed"); n != 1 {
		t.Errorf("%d log lines about the CRD installed, want 1:\n%s", n, log)
	}
	calls := len(dyn.Actions())
	time.Sleep(100 * time.Millisecond) // ten polls' time
	if n := len(dyn.Actions()); n != calls {
		t.Errorf("%d more calls to the API once the CRD is watched, want none: %v", n-calls, dyn.Actions()[calls:])
	}
}

func policyObject(t *testing.T, ip string) *unstructured.Unstructured {
	t.Helper()
	p := &redirectpolicy.Policy{
		ObjectMeta: metav1.ObjectMeta{Name: "dns", Namespace: "kube-system"},
		Spec: redirectpolicy.Spec{
			RedirectFrontend: redirectpolicy.Frontend{AddressMatcher: &redirectpolicy.AddressMatcher{
				IP: ip, ToPorts: []redirectpolicy.PortInfo{{Port: "53", Protocol: "UDP"}}}},
			RedirectBackend: redirectpolicy.Backend{
				LocalEndpointSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "dns"}},
				ToPorts:               []redirectpolicy.PortInfo{{Port: "5353", Protocol: "UDP"}}},
		},
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{Object: u}
	obj.SetAPIVersion(redirectpolicy.SchemeGroupVersion.String())
	obj.SetKind(redirectpolicy.Kind)
	return obj
}

// A policy from the API redirects its address to the ready local pod;
// an invalid update is reported and the last valid version keeps
// serving; deleting the policy removes its frontend.
func TestPolicyFromAPIRedirectsAndKeepsLastValidVersion(t *testing.T) {
	dyn := installedCRDs(policyObject(t, "169.254.20.10"))
	r, w, db, _ := startPolicyReflector(t, fake.NewClientset(dnsPod()), dyn, policyTest{})
	backends := redirectedBackends(w, db, "169.254.20.10:53/UDP")
	eventually(t, "redirected to the pod", func() bool { return backends() == "10.0.1.1:5353/UDP" })

	policies := dyn.Resource(redirectpolicy.Resource).Namespace("kube-system")
	errs := r.src.Errors()
	if _, err := policies.Update(context.Background(), policyObject(t, "169.254.20.300"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the invalid update reported", func() bool { return r.src.Errors() > errs })
	if got := backends(); got != "10.0.1.1:5353/UDP" {
		t.Errorf("after an invalid update: %s, want the last valid version's backend", got)
	}

	if err := policies.Delete(context.Background(), "dns", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the frontend gone with the policy", func() bool { return backends() == "none" })
}

// --lrp-address-matcher-cidrs reaches the policies: an address outside
// them is reported and not redirected, one inside is.
func TestAddressMatcherOutsideAllowedCIDRsIsReported(t *testing.T) {
	dyn := installedCRDs(policyObject(t, "169.254.20.10"))
	r, w, db, _ := startPolicyReflector(t, fake.NewClientset(dnsPod()), dyn, policyTest{cidrs: []string{"192.0.2.0/24"}})
	eventually(t, "synced", r.src.IsSynced)
	if r.src.Errors() == 0 {
		t.Error("a policy outside --lrp-address-matcher-cidrs was not reported")
	}
	if got := redirectedBackends(w, db, "169.254.20.10:53/UDP")(); got != "none" {
		t.Errorf("169.254.20.10 redirected to %s, outside the allowed CIDRs", got)
	}
	if _, err := dyn.Resource(redirectpolicy.Resource).Namespace("kube-system").Update(context.Background(), policyObject(t, "192.0.2.53"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "an address inside redirected", func() bool { return redirectedBackends(w, db, "192.0.2.53:53/UDP")() == "10.0.1.1:5353/UDP" })
}

// redirectedBackends returns a function listing the backends of the
// frontend at addr ("none" without one).
func redirectedBackends(w *tables.Writer, db *statedb.DB, addr string) func() string {
	a := lb.MustParseL3n4Addr(addr)
	return func() string {
		fe, _, found := w.Frontends().Get(db.ReadTxn(), tables.FrontendByAddress.Query(a))
		if !found {
			return "none"
		}
		var out []string
		for _, b := range fe.Backends {
			out = append(out, b.Address.String())
		}
		return strings.Join(out, " ")
	}
}

// dnsPod is a ready pod on node-1 that policyObject selects.
func dnsPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "dns-1", Namespace: "kube-system", Labels: map[string]string{"app": "dns"}},
		Spec:       corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.0.1.1"}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

// allResources are the list kinds of every resource the reflector's
// dynamic client lists.
func allResources() map[schema.GroupVersionResource]string {
	m := maps.Clone(redirectpolicy.ResourceList)
	maps.Copy(m, routes.ResourceList)
	maps.Copy(m, kubeapi.CRDListKinds)
	return m
}

// installedCRDs returns a fake dynamic client serving every CRD-backed
// kind the reflector reads, Established in each version it reads, and
// objs.
func installedCRDs(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), allResources(), append(kubeapi.FakeCRDs(append(routes.Kinds(), redirectpolicy.Kinds("")...)...), objs...)...)
}
