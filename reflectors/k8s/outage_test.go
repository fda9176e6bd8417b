package k8s

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/lbstate/lbstate/internal/healthlog"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/metrics"
	"github.com/lbstate/lbstate/reflectors/kubeapi"
	"github.com/lbstate/lbstate/reflectors/redirectpolicy"
	"github.com/lbstate/lbstate/tables"
)

// apiServer is client-go's fake clientsets (typed and dynamic) as an
// API server that can be killed: while down, every list and watch fails
// as a refused connection does (a *url.Error wrapping ECONNREFUSED), and
// the watches it served end. Changes made meanwhile through its trackers
// (a second API server on the same etcd) are there when it comes back.
type apiServer struct {
	*fake.Clientset
	dyn      *dynamicfake.FakeDynamicClient
	mu       sync.Mutex
	down     bool
	watches  []watch.Interface
	failures atomic.Int64 // calls refused
}

func newAPIServer(down bool, objs ...runtime.Object) *apiServer {
	s := &apiServer{Clientset: fake.NewClientset(objs...), down: down,
		dyn: installedCRDs()}
	s.serve(&s.Fake, s.Tracker())
	s.serve(&s.dyn.Fake, s.dyn.Tracker())
	return s
}

// serve makes client's lists and watches fail while s is down, and
// records its watches (of tracker) to end them when it goes down.
func (s *apiServer) serve(client *k8stesting.Fake, tracker k8stesting.ObjectTracker) {
	client.PrependReactor("list", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.down {
			return true, nil, s.refuse(a)
		}
		return false, nil, nil
	})
	client.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.down {
			return true, nil, s.refuse(a)
		}
		var opts metav1.ListOptions
		if wa, ok := a.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := tracker.Watch(a.GetResource(), a.GetNamespace(), opts)
		if err != nil {
			return true, nil, err
		}
		s.watches = append(s.watches, w)
		return true, w, nil
	})
}

func (s *apiServer) refuse(a k8stesting.Action) error {
	s.failures.Add(1)
	return &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/api/v1/" + a.GetResource().Resource, Err: &net.OpError{
		Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
}

// kill takes the API server down and ends its watches.
func (s *apiServer) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = true
	for _, w := range s.watches {
		w.Stop()
	}
	s.watches = nil
}

// restart brings it back.
func (s *apiServer) restart() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = false
}

// agent is the k8s source's Cell in a hive, over an apiServer.
type agent struct {
	w      *tables.Writer
	db     *statedb.DB
	reg    *prometheus.Registry
	health *healthlog.Log
	log    *syncedLog
	stop   func() // stops the hive (once)
}

// startAgent runs Cell over api with args as its flags.
func startAgent(t *testing.T, api *apiServer, args ...string) *agent {
	t.Helper()
	a := &agent{health: &healthlog.Log{}, log: &syncedLog{}}
	h := hive.New(statedb.Cell, job.Cell, metrics.Cell, tables.Cell, kubeapi.Cell, Cell, redirectpolicy.Cell,
		cell.Provide(a.health.Health),
		cell.Provide(func() kubernetes.Interface { return api }, func() dynamic.Interface { return api.dyn }),
		cell.Invoke(func(w *tables.Writer, db *statedb.DB, reg *prometheus.Registry) { a.w, a.db, a.reg = w, db, reg }))
	flags := pflag.NewFlagSet("test", pflag.ContinueOnError)
	h.RegisterFlags(flags)
	if err := flags.Parse(append([]string{"--k8s-node-name", "node-1"}, args...)); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(a.log, nil))
	if err := h.Start(log, context.Background()); err != nil {
		t.Fatal(err)
	}
	a.stop = sync.OnceFunc(func() { h.Stop(log, context.Background()) })
	t.Cleanup(a.stop)
	return a
}

// logOf is the log lines of one source.
func (a *agent) logOf(source string) string {
	var out []string
	for _, l := range strings.Split(a.log.String(), "\n") {
		if strings.Contains(l, " source="+source+" ") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// connected is the source's lbstate_source_connected, or -1 without one.
func (a *agent) connected() float64 {
	families, _ := a.reg.Gather()
	for _, f := range families {
		if f.GetName() == "lbstate_source_connected" {
			for _, m := range f.GetMetric() {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

// backends is the addresses of the backends of the frontend at addr.
func (a *agent) backends(addr string) string {
	fe, _, ok := a.w.Frontends().Get(a.db.ReadTxn(), tables.FrontendByAddress.Query(lb.MustParseL3n4Addr(addr)))
	if !ok {
		return ""
	}
	var out []string
	for _, b := range fe.Backends {
		out = append(out, b.Address.Addr().String())
	}
	return strings.Join(out, " ")
}

func webService(name, ip string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: []corev1.ServicePort{{Port: 80}}}}
}

var (
	slicesResource   = discoveryv1.SchemeGroupVersion.WithResource("endpointslices")
	servicesResource = corev1.SchemeGroupVersion.WithResource("services")
)

// An outage of the API server is visible and heals fast: while it is
// down the source serves its last state, its connected gauge is 0, its
// health degraded with the error, and it logs one WARN line however many
// calls fail; once it is back, what changed meanwhile (a slice's
// endpoint, a new Service, a local redirect policy's address, through
// the dynamic client) is applied within 2 s, the gauge is 1, the
// health OK, and one INFO line says how long the outage lasted. Watches
// that lasted under a second end in client-go's "very short watch",
// after which it lists again (with its backoff); longer ones are started
// again at once: both meet the retries.
func TestOutageVisibleAndChangesAppliedSoonAfterReturn(t *testing.T) {
	for _, tc := range []struct{ watched, outage time.Duration }{
		{0, 2 * time.Second},
		// Long enough for client-go's own backoff (0.8 s doubling, with
		// full jitter) to wait past the 2 s allowed below.
		{1500 * time.Millisecond, 5 * time.Second},
	} {
		t.Run(fmt.Sprintf("watched %s, outage %s", tc.watched, tc.outage), func(t *testing.T) { testOutage(t, tc.watched, tc.outage) })
	}
}

func testOutage(t *testing.T, watched, outage time.Duration) {
	const web = "10.96.0.10:80/TCP"
	api := newAPIServer(false, webService("web", "10.96.0.10"), labelledSlice("web-1", "web", "10.0.0.1"), dnsPod())
	if err := api.dyn.Tracker().Create(redirectpolicy.Resource, policyObject(t, "169.254.20.10"), "kube-system"); err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, api)
	eventually(t, "synced and connected", func() bool {
		return a.health.Last() == "OK Synced" && a.connected() == 1 && a.backends(web) == "10.0.0.1" &&
			redirectedBackends(a.w, a.db, "169.254.20.10:53/UDP")() == "10.0.1.1:5353/UDP"
	})
	time.Sleep(watched) // the watches' age when the API server dies is what this test varies

	api.kill()
	killed := time.Now()
	// The gauge is set just before the health is told: wait for both.
	eventually(t, "disconnected", func() bool {
		return a.connected() == 0 && strings.HasPrefix(a.health.Last(), "Degraded")
	})
	if got := a.health.Last(); !strings.HasPrefix(got, "Degraded Disconnected, serving the last state: ") || !strings.Contains(got, "connection refused") {
		t.Fatalf("health %q while the API server is down", got)
	}
	if err := api.Tracker().Update(slicesResource, labelledSlice("web-1", "web", "10.0.0.2"), "ns"); err != nil {
		t.Fatal(err)
	}
	if err := api.Tracker().Create(servicesResource, webService("late", "10.96.0.11"), "ns"); err != nil {
		t.Fatal(err)
	}
	if err := api.dyn.Tracker().Update(redirectpolicy.Resource, policyObject(t, "169.254.20.11"), "kube-system"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "retries", func() bool { return api.failures.Load() >= 30 })
	time.Sleep(time.Until(killed.Add(outage))) // long enough for the retries to reach their longest interval
	if got := a.backends(web); got != "10.0.0.1" {
		t.Fatalf("backends %q while the API server is down, want the last state kept", got)
	}

	api.restart()
	back := time.Now()
	redirected := redirectedBackends(a.w, a.db, "169.254.20.11:53/UDP")
	for a.backends(web) != "10.0.0.2" || !declared(a.w, a.db, lb.NewServiceName("ns", "late")) || redirected() != "10.0.1.1:5353/UDP" {
		if time.Since(back) > 2*time.Second {
			t.Fatalf("changes made during the outage not applied 2s after the API server returned: backends %q, policy's %q", a.backends(web), redirected())
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("changes applied %s after the API server returned (%d calls refused during the outage)", time.Since(back), api.failures.Load())
	eventually(t, "connected again", func() bool { return a.connected() == 1 && a.health.Last() == "OK Synced" })
	// Each source of the feed (services, redirect policies) says it once.
	out := a.logOf("k8s")
	if n := strings.Count(out, "level=WARN"); n != 1 || !strings.Contains(out, "Source disconnected, retrying") {
		t.Errorf("%d WARN lines for one outage of %d failed calls, want one:\n%s", n, api.failures.Load(), out)
	}
	if n := strings.Count(out, `msg="Source reconnected"`); n != 1 || !strings.Contains(out, "outage=") {
		t.Errorf("%d reconnection lines, want one with the outage's duration:\n%s", n, out)
	}
	policies := a.logOf("k8s-redirect-policies")
	if n := strings.Count(policies, "level=WARN"); n != 1 || strings.Count(policies, `msg="Source reconnected"`) != 1 {
		t.Errorf("%d WARN lines of the policies' source for one outage, want one, and one reconnection:\n%s", n, policies)
	}
}

// An API server unreachable at start makes the source degraded at once
// (disconnected, with the error), and "not synced after" the sync
// timeout; the tables stay uninitialized. Once it answers the source
// syncs, connects and is OK.
func TestUnreachableAtStartDegradedThenSynced(t *testing.T) {
	const web = "10.96.0.10:80/TCP"
	api := newAPIServer(true, webService("web", "10.96.0.10"), labelledSlice("web-1", "web", "10.0.0.1"))
	a := startAgent(t, api, "--k8s-sync-timeout", "300ms")
	eventually(t, "degraded", func() bool {
		return strings.HasPrefix(a.health.Last(), "Degraded Disconnected, waiting for the initial sync: ")
	})
	if got := a.connected(); got != 0 {
		t.Errorf("lbstate_source_connected = %v while unreachable, want 0", got)
	}
	eventually(t, "not synced after the timeout", func() bool {
		got := a.health.Last()
		return strings.HasPrefix(got, "Degraded Not synced after 300ms: ") && strings.Contains(got, "connection refused")
	})
	if init, _ := a.w.Frontends().Initialized(a.db.ReadTxn()); init {
		t.Fatal("tables initialized before the source synced")
	}
	api.restart()
	eventually(t, "synced", func() bool {
		return a.health.Last() == "OK Synced" && a.connected() == 1 && a.backends(web) == "10.0.0.1"
	})
	out := a.logOf("k8s")
	if n := strings.Count(out, "Source disconnected, retrying"); n != 1 {
		t.Errorf("%d disconnection lines, want 1:\n%s", n, out)
	}
	if n := strings.Count(out, "Source not synced in time"); n != 1 {
		t.Errorf("%d lines about the sync timeout, want 1:\n%s", n, out)
	}
}

// A source stopped during an outage says nothing more: its informers
// stopping is no reconnection.
func TestStoppedWhileDisconnectedLogsNoReconnection(t *testing.T) {
	api := newAPIServer(false, webService("web", "10.96.0.10"))
	a := startAgent(t, api)
	eventually(t, "connected", func() bool { return a.connected() == 1 })
	api.kill()
	eventually(t, "disconnected", func() bool { return a.connected() == 0 })
	a.stop()
	if out := a.log.String(); strings.Contains(out, "Source reconnected") {
		t.Fatalf("a reconnection logged as the source stopped:\n%s", out)
	}
}

func TestConfigRejectsNegativeSyncTimeout(t *testing.T) {
	cfg := DefaultConfig
	cfg = cfg.WithNode("n1")
	cfg.K8sSyncTimeout = -time.Second
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--k8s-sync-timeout") {
		t.Fatalf("Validate: %v, want an error naming --k8s-sync-timeout", err)
	}
}
