package monitoring

import (
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors/clustermesh/embedetcd"
)

func TestMain(m *testing.M) {
	bpftest.MaybeClient() // when the process is a test's client, it ends here
	bpftest.Main(m)
}

// The variables the test sets, as Grafana substitutes them: a
// multi-value selection is a regex alternation; $__rate_interval is
// what Grafana picks for a 1 s scrape interval and a short range.
var variables = strings.NewReplacer(
	"$node", "node-a",
	"$namespace", "shop",
	"$service", "(web|empty|probed|api)",
	"$__rate_interval", "1m",
)

// webRoute is how the route of testdata/node-a/web.yaml is named, in
// the frontends table and in the metrics' route label.
const webRoute = "HTTPRoute shop/web"

// emptyInTheDemo names the panel queries that can only be empty in this
// test, and why. A query named here that returns data fails the test,
// so the list stays true.
var emptyInTheDemo = map[string]string{}

// A real Prometheus scraping a real agent (the reference datapath
// attached in namespaces of the test's own, real connections through a
// 90/10 route, health checks of loopback backends, a remote cluster over
// an etcd on loopback) answers every query of every dashboard with data,
// with the variables set; and no dashboard query or alert rule names a
// metric or label the agent does not export. The measured split the
// Services dashboard shows is the route's 90/10.
func TestEveryDashboardQueryAnswersFromARealAgent(t *testing.T) {
	bpftest.Require(t)
	lookPath(t, "prometheus")
	panels, vars := dashboardQueries(t)

	// Cluster b exports shop/api to an etcd on loopback; node-a imports
	// it (and exports its own global service there too).
	etcd, err := embedetcd.Start(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcd.Stop)
	meshDir := t.TempDir()
	export := filepath.Join(meshDir, "etcd.yaml")
	for _, f := range []string{export, filepath.Join(meshDir, "remotes", "cluster-b")} {
		os.MkdirAll(filepath.Dir(f), 0o755)
		if err := etcd.WriteClientConfig(f, nil); err != nil {
			t.Fatal(err)
		}
	}
	clusterB := newAgent(t, "--manifests", "testdata/cluster-b", "--k8s-node-name", "node-b", "--lb-maps", "memory",
		"--cluster-name", "cluster-b", "--cluster-id", "2", "--clustermesh-export", export)
	clusterB.start(nil)

	// The node: backends in a namespace, clients outside it over a veth
	// and in a cgroup inside it.
	node, outside, cg := bpftest.NewNetns(t), bpftest.NewNetns(t), bpftest.Cgroup(t)
	bpftest.Link(t, node, "lbnode0", "198.51.100.1/24", outside, "lbout0", "198.51.100.2/24")
	outside.AddRoute(t, "203.0.113.10/32", "198.51.100.1")
	for i := 1; i <= 3; i++ {
		node.AddAddr(t, fmt.Sprintf("10.1.0.%d/32", i))
		bpftest.ServeName(t, node, fmt.Sprintf("10.1.0.%d", i), 8080, fmt.Sprintf("b%d", i))
	}
	// Health-checked backends on the root namespace's loopback (where
	// the prober runs): one listening, one not.
	up, err := net.Listen("tcp", "127.0.29.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	go func() {
		for {
			c, err := up.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := up.Addr().(*net.TCPAddr).Port
	manifests := copyDir(t, "testdata/node-a")
	if err := os.WriteFile(filepath.Join(manifests, "probed.yaml"), []byte(probedService("127.0.29.1", "127.0.29.2", port)), 0o644); err != nil {
		t.Fatal(err)
	}
	bpftest.Require(t)
	a := newAgent(t, "--lb-maps", "kernel", "--lb-pin-dir", bpftest.Config(t).LBPinDir,
		"--manifests", manifests, "--k8s-node-name", "node-a",
		"--lb-datapath", "both", "--lb-cgroup", cg, "--lb-devices", "lbnode0",
		"--health", "--health-networks", "127.0.0.0/8", "--health-interval", "200ms", "--health-timeout", "100ms",
		"--cluster-name", "cluster-a", "--cluster-id", "1",
		"--clustermesh-config", filepath.Join(meshDir, "remotes"), "--clustermesh-export", export)
	a.start(node.Do)
	down := fmt.Sprintf("127.0.29.2:%d/TCP", port)
	a.waitFor("the routed web, cluster b's api backends and the down backend quarantined", func(txn statedb.ReadTxn) bool {
		web, lbWeb, api, probed := a.frontend(txn, "10.96.0.10:80/TCP"), a.frontend(txn, "203.0.113.10:80/TCP"),
			a.frontend(txn, "10.96.0.20:80/TCP"), a.frontend(txn, "10.96.0.30:80/TCP")
		return web != nil && web.RoutedBy() == webRoute && lbWeb != nil && lbWeb.RoutedBy() == webRoute &&
			api != nil && len(api.Backends) == 3 && probed != nil &&
			slices.ContainsFunc(probed.Backends, func(b lb.BackendRef) bool { return b.Address.String() == down && b.State.String() == "quarantined" })
	})

	target := a.serveMetrics()
	prom := startPrometheus(t, target, "node-a")

	// Real connections through the route: from the cgroup to the
	// ClusterIP (socket programs), from outside to the LoadBalancer IP
	// (tc programs, which count packets and bytes); and to a service
	// without backends, which the datapath refuses and counts. A series
	// is born with its first value, which rate() cannot count: a first
	// round makes every series, and once Prometheus has them the second
	// round is what the panels measure.
	connect := func(n int) {
		for _, c := range []struct {
			cg, line string
			ns       *bpftest.Netns
		}{
			{cg, fmt.Sprintf("tcp 10.96.0.10:80 %d", n), node},
			{"", fmt.Sprintf("tcp 203.0.113.10:80 %d", n), outside},
		} {
			for _, l := range bpftest.RunClient(t, c.cg, c.ns, c.line) {
				if !strings.HasPrefix(l, "b") {
					t.Fatalf("%s: %q, want a backend's name", c.line, l)
				}
			}
		}
		refused := bpftest.RunClient(t, cg, node, fmt.Sprintf("tcp 10.96.0.13:80 %d", n/10))
		if len(refused) != n/10 || !strings.HasPrefix(refused[0], "refused") {
			t.Fatalf("connects to a service without backends: %q, want %d refused", refused, n/10)
		}
	}
	routeSeries := `count(lbstate_backend_flows_total{route="` + webRoute + `"})`
	dropSeries := `count(lbstate_frontend_drops_total{service_name="empty", reason="no-backend"})`
	for round := 0; ; round++ {
		connect(50)
		var routed, dropped []sample
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			routed, _ = prom.query(routeSeries)
			dropped, _ = prom.query(dropSeries)
			if len(routed) == 1 && routed[0].value() == 6 && len(dropped) == 1 {
				break
			}
		}
		if len(routed) == 1 && routed[0].value() == 6 && len(dropped) == 1 {
			break
		}
		if round == 5 {
			t.Fatalf("prometheus lacks some of the 6 series of the route's backends (%v) or the drops' (%v)", routed, dropped)
		}
	}
	const n = 1000
	connect(n)
	prom.waitFor("the second round's flows", `sum(lbstate_backend_flows_total{route="`+webRoute+`"})`, func(s []sample) bool {
		return len(s) == 1 && s[0].value() >= 2*(50+n)
	})
	prom.waitFor("a few scrapes", `count_over_time(up{job="lbstate"}[1m])`, func(s []sample) bool {
		return len(s) == 1 && s[0].value() >= 5
	})

	known := exportedBy(t, a.registry)
	for _, q := range slices.Concat(panels, vars, ruleQueries(t)) {
		if bad := known.check(q); len(bad) > 0 {
			t.Errorf("%s: the agent does not export %s\n\t%s", q.where, strings.Join(bad, ", "), q.expr)
		}
	}
	for _, q := range slices.Concat(panels, vars) {
		expr := variables.Replace(q.expr)
		res, err := prom.query(expr)
		why, empty := emptyInTheDemo[q.where]
		switch {
		case err != nil:
			t.Errorf("%s: %v\n\t%s", q.where, err, expr)
		case len(res) == 0 && !empty:
			t.Errorf("%s: no data\n\t%s", q.where, expr)
		case len(res) > 0 && empty:
			t.Errorf("%s: data, but the test says it is empty in the demo (%s)", q.where, why)
		case empty:
			t.Logf("%s: empty, as expected: %s", q.where, why)
		}
	}
	for name, health := range prom.rules() {
		if health != "ok" {
			t.Errorf("prometheus evaluates the rule %s: %s", name, health)
		}
	}
	checkSplit(t, prom, panels)
}

// checkSplit checks the Services dashboard's route panels: the
// configured shares of the canary's backend are 10% of each routed
// frontend, and the measured ones 10% ± 5 points (over 1,000 flows each: 5 standard deviations).
func checkSplit(t *testing.T, prom *promServer, panels []query) {
	t.Helper()
	for _, title := range []string{"Route shares: configured", "Route shares: measured"} {
		i := slices.IndexFunc(panels, func(q query) bool { return strings.Contains(q.where, ": "+title+" (A)") })
		if i < 0 {
			t.Fatalf("no panel %q", title)
		}
		res, err := prom.query(variables.Replace(panels[i].expr))
		if err != nil {
			t.Fatal(err)
		}
		canary := map[string]float64{}
		for _, s := range res {
			if s.Metric["route"] != webRoute {
				t.Errorf("%s: a series of route %q", title, s.Metric["route"])
			}
			if s.Metric["backend"] == "10.1.0.3:8080/TCP" {
				canary[s.Metric["frontend"]] += s.value()
			}
		}
		for _, fe := range []string{"10.96.0.10:80/TCP", "203.0.113.10:80/TCP"} {
			share, ok := canary[fe]
			t.Logf("%s: the canary's share of %s: %.3f", title, fe, share)
			tolerance := 0.05
			if strings.HasSuffix(title, "configured") {
				tolerance = 0.001
			}
			if !ok || math.Abs(share-0.1) > tolerance {
				t.Errorf("%s: the canary's share of %s is %v (present %v), want 0.1 ± %v", title, fe, strconv.FormatFloat(share, 'f', 3, 64), ok, tolerance)
			}
		}
	}
}
