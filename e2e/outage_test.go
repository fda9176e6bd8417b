package e2e

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/hive/cell"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// outageWorld is what the outage scenarios change while the agent's API
// server is down: a Service to delete, an endpoint to remove, a route to
// re-weight and a node to relabel.
type outageWorld struct {
	c                      *cluster
	n                      *node
	a                      *agent
	web, gone, split, zone string // ClusterIP frontends (":80/TCP")
	pods                   map[string]*pod
}

func newOutageWorld(t *testing.T) *outageWorld {
	c := newCluster(t, clusterOptions{})
	n := newNode(t, "node-a")
	c.createNode("node-a", map[string]string{zoneLabel: "zone-a"})
	a := n.startAgent(c)
	w := &outageWorld{c: c, n: n, a: a, pods: map[string]*pod{}}
	for _, name := range []string{"web-1", "web-2", "gone-1", "v1", "v2", "in-zone-a", "in-zone-b"} {
		w.pods[name] = n.newPod(name, 8080)
	}
	svc := func(name string, spec corev1.ServiceSpec, eps ...endpoint) string {
		spec.Ports, spec.Selector = webPorts[:1], map[string]string{"app": name}
		ip := c.createService(name, spec).Spec.ClusterIP
		c.setSlice(name, name+"-1", webSlicePorts[:1], eps...)
		return fmtAddr(ip, 80, "TCP")
	}
	w.web = svc("web", corev1.ServiceSpec{}, ready(w.pods["web-1"], n.name), ready(w.pods["web-2"], n.name))
	w.gone = svc("gone", corev1.ServiceSpec{}, ready(w.pods["gone-1"], n.name))
	w.split = svc("split", corev1.ServiceSpec{}, ready(w.pods["v1"], n.name))
	svc("split-v1", corev1.ServiceSpec{}, ready(w.pods["v1"], n.name))
	svc("split-v2", corev1.ServiceSpec{}, ready(w.pods["v2"], n.name))
	c.applyRoute(httpRoute(c.ns, "split", "split", map[string]int64{"split-v1": 1}))
	w.zone = svc("zonal", corev1.ServiceSpec{TrafficDistribution: new(corev1.ServiceTrafficDistributionPreferSameZone)},
		endpoint{pod: w.pods["in-zone-a"], node: "node-a", zone: "zone-a", hintZones: []string{"zone-a"}},
		endpoint{pod: w.pods["in-zone-b"], node: "node-b", zone: "zone-b", hintZones: []string{"zone-b"}})
	w.waitBefore()
	return w
}

func (w *outageWorld) be(name string) string { return w.pods[name].ip + ":8080" }

func (w *outageWorld) waitBefore() {
	a := w.a
	a.waitFrontend(w.web, 10*time.Second, w.be("web-1"), w.be("web-2"))
	a.waitFrontend(w.gone, 10*time.Second, w.be("gone-1"))
	a.waitFrontend(w.split, 10*time.Second, w.be("v1"))
	a.waitFrontend(w.zone, 10*time.Second, w.be("in-zone-a"))
}

// change makes the four changes through c (another API server of the
// same cluster).
func (w *outageWorld) change(c *cluster) {
	check(c.t, c.kube.CoreV1().Services(c.ns).Delete(c.ctx(), "gone", metav1.DeleteOptions{}))
	check(c.t, c.kube.DiscoveryV1().EndpointSlices(c.ns).Delete(c.ctx(), "gone-1", metav1.DeleteOptions{}))
	c.setSlice("web", "web-1", webSlicePorts[:1], ready(w.pods["web-1"], w.n.name))
	c.applyRoute(httpRoute(c.ns, "split", "split", map[string]int64{"split-v2": 1}))
	c.relabel("node-a", "zone-b")
}

// waitAfter waits until every change is in the maps, within timeout,
// and returns how long each took, from the call.
func (w *outageWorld) waitAfter(timeout time.Duration) map[string]time.Duration {
	start := time.Now()
	took := map[string]time.Duration{}
	wait := func(what string, limit time.Duration, f func(time.Duration)) {
		f(max(limit-time.Since(start), time.Millisecond))
		took[what] = time.Since(start).Round(time.Millisecond)
	}
	a := w.a
	wait("Service deleted", timeout, func(d time.Duration) { a.waitNoFrontend(w.gone, d) })
	wait("endpoint removed", timeout, func(d time.Duration) { a.waitFrontend(w.web, d, w.be("web-1")) })
	wait("node relabelled", timeout, func(d time.Duration) { a.waitFrontend(w.zone, d, w.be("in-zone-b")) })
	wait("route re-weighted", timeout, func(d time.Duration) { a.waitFrontend(w.split, d, w.be("v2")) })
	return took
}

// trafficDuring keeps new connections flowing from the client pod to
// the web Service until stop is called, which returns how many
// connections were made and how many failed.
func (w *outageWorld) trafficDuring(t *testing.T) (stop func() (ok, failed int)) {
	addr := w.web[:len(w.web)-len("/TCP")]
	var okN, failedN atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			err := w.n.client.Do(func() error {
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					return err
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(time.Second))
				_, err = c.Read(make([]byte, 64))
				return err
			})
			if err != nil {
				failedN.Add(1)
				t.Logf("a connection to %s during the outage: %v", addr, err)
			} else {
				okN.Add(1)
			}
		}
	})
	stop = sync.OnceValues(func() (int, int) {
		close(done)
		wg.Wait()
		return int(okN.Load()), int(failedN.Load())
	})
	t.Cleanup(func() { stop() }) // before the node and the agent go
	return stop
}

// The API server is killed for 20 s while connections keep flowing (they
// all succeed); the source reports itself disconnected (gauge, health,
// one WARN line); changes made meanwhile through a second API server (a
// Service deleted, an endpoint removed, a route re-weighted, the node
// relabelled) all reach the maps within 5 s of the first API server's
// /readyz; the source reports itself connected again (one INFO line).
func TestAPIServerOutageKeepsTrafficAndResyncsWithinFiveSeconds(t *testing.T) {
	w := newOutageWorld(t)
	c, a := w.c, w.a
	stop := w.trafficDuring(t)
	killed := time.Now()
	c.api.kill()
	eventually(t, 10*time.Second, func() error {
		if got := a.metric("lbstate_source_connected", "source", "k8s"); got != 0 {
			return fmt.Errorf("lbstate_source_connected{source=k8s} = %v with the API server down", got)
		}
		return nil
	})
	a.wantHealth("k8s", cell.StatusDegraded)

	other := &cluster{t: t, api: c.api.another(), ns: c.ns}
	other.connect()
	w.change(other)
	time.Sleep(time.Until(killed.Add(20 * time.Second)))
	// Each source of the API feed (services, redirect policies, routes)
	// says it once.
	for _, src := range apiFeedSources {
		if got := a.logs.count("level=WARN", "Source disconnected", "source="+src+" "); got != 1 {
			t.Errorf("%d WARN lines of %s for one outage, want 1", got, src)
		}
	}

	c.api.restart()
	took := w.waitAfter(5 * time.Second)
	t.Logf("changes made during the outage, in the maps after /readyz: %v", took)
	ok, failed := stop()
	if failed > 0 || ok < 100 {
		t.Errorf("connections during the outage: %d succeeded, %d failed; want all of at least 100 to succeed", ok, failed)
	}
	eventually(t, 5*time.Second, func() error {
		if got := a.metric("lbstate_source_connected", "source", "k8s"); got != 1 {
			return fmt.Errorf("lbstate_source_connected{source=k8s} = %v after the API server returned", got)
		}
		return nil
	})
	a.wantHealth("k8s", cell.StatusOK)
	for _, src := range apiFeedSources {
		if got := a.logs.count("level=INFO", "Source reconnected", "source="+src+" "); got != 1 {
			t.Errorf("%d INFO lines of %s for the end of one outage, want 1", got, src)
		}
		if got := a.logs.count("level=WARN", "Source disconnected", "source="+src+" "); got != 1 {
			t.Errorf("%d WARN lines of %s for one outage, want 1", got, src)
		}
	}
}

// apiFeedSources are the agent's sources on the API server's feed.
var apiFeedSources = []string{"k8s", "k8s-redirect-policies", "k8s-routes"}

// While the agent's API server is down, etcd is compacted past what the
// agent has seen: when it returns, the agent's watches are told their
// resource version is gone (410) and list again, and lose nothing.
func TestEtcdCompactionDuringAnOutageLosesNothing(t *testing.T) {
	w := newOutageWorld(t)
	c := w.c
	c.api.kill()
	other := &cluster{t: t, api: c.api.another(), ns: c.ns}
	other.connect()
	w.change(other)
	// More writes after the changes, so that the compaction leaves
	// nothing of what the agent has seen.
	for i := range 20 {
		other.createService(fmt.Sprintf("filler-%d", i), corev1.ServiceSpec{Ports: webPorts[:1]})
	}
	compactEtcd(t)

	c.api.restart()
	took := w.waitAfter(5 * time.Second)
	t.Logf("changes made during the outage, etcd compacted, in the maps after /readyz: %v", took)
	for i := range 20 {
		ip, err := c.kube.CoreV1().Services(c.ns).Get(c.ctx(), fmt.Sprintf("filler-%d", i), metav1.GetOptions{})
		check(t, err)
		w.a.waitFrontend(fmtAddr(ip.Spec.ClusterIP, 80, "TCP"), 5*time.Second)
	}
}

// compactEtcd compacts the suite's etcd up to its current revision.
func compactEtcd(t testing.TB) {
	t.Helper()
	client, err := clientv3.New(suiteEtcd.ClientConfig())
	check(t, err)
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := client.Get(ctx, "compact-probe")
	check(t, err)
	_, err = client.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical())
	check(t, err)
}
