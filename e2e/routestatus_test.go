package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lbstate/lbstate/metrics"
	"github.com/lbstate/lbstate/reflectors/k8s"
	"github.com/lbstate/lbstate/reflectors/kubeapi"
	"github.com/lbstate/lbstate/reflectors/routes"
	"github.com/lbstate/lbstate/reflectors/routestatus"
	"github.com/lbstate/lbstate/tables"
)

// routeParents returns route name's status.parents entry of lbstate's
// controller, every entry, and the route's generation.
func (c *cluster) routeParents(name string) (ours map[string]any, all []any, generation int64, err error) {
	u, err := c.dyn.Resource(httpRoutes).Namespace(c.ns).Get(c.ctx(), name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, 0, err
	}
	all, _, _ = unstructured.NestedSlice(u.Object, "status", "parents")
	for _, p := range all {
		if e := p.(map[string]any); e["controllerName"] == routestatus.ControllerName {
			ours = e
		}
	}
	return ours, all, u.GetGeneration(), nil
}

// conditionOf returns the status, reason and observedGeneration of
// entry's condition of type typ.
func conditionOf(entry map[string]any, typ string) (status, reason string, observed int64) {
	conds, _, _ := unstructured.NestedSlice(entry, "conditions")
	for _, c := range conds {
		if m := c.(map[string]any); m["type"] == typ {
			observed, _, _ = unstructured.NestedInt64(m, "observedGeneration")
			return fmt.Sprint(m["status"]), fmt.Sprint(m["reason"]), observed
		}
	}
	return "", "", 0
}

// Against a real API server (its CRD validation and status subresource):
// an HTTPRoute on a Service gets lbstate's status.parents entry, Accepted,
// with ResolvedRefs BackendNotFound until its missing backend Service is
// created, at the route's generation as it changes; another controller's
// entry (for a Gateway parent) stays as it was; the agent holds the Lease;
// and the status is written once per change.
func TestRouteStatusIsWrittenThroughTheRealAPI(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	for _, name := range []string{"web", "web-v1"} {
		c.createService(name, corev1.ServiceSpec{Ports: webPorts[:1], Selector: map[string]string{"app": name}})
	}
	route := httpRoute(c.ns, "web-split", "web", map[string]int64{"web-v1": 90, "web-v2": 10})
	parents, _, _ := unstructured.NestedSlice(route.Object, "spec", "parentRefs")
	gateway := map[string]any{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}
	check(t, unstructured.SetNestedSlice(route.Object, append(parents, gateway), "spec", "parentRefs"))
	c.applyRoute(route)
	// A gateway controller's entry, written before the agent starts.
	theirs := map[string]any{
		"parentRef":      gateway,
		"controllerName": "example.net/gateway-controller",
		"conditions": []any{map[string]any{"type": "Accepted", "status": "True", "reason": "Accepted",
			"message": "by the gateway", "observedGeneration": int64(1), "lastTransitionTime": "2026-01-01T00:00:00Z"}},
	}
	eventually(t, 10*time.Second, func() error {
		u, err := c.dyn.Resource(httpRoutes).Namespace(c.ns).Get(c.ctx(), "web-split", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := unstructured.SetNestedSlice(u.Object, []any{theirs}, "status", "parents"); err != nil {
			return err
		}
		_, err = c.dyn.Resource(httpRoutes).Namespace(c.ns).UpdateStatus(c.ctx(), u, metav1.UpdateOptions{})
		return err
	})

	n := newNode(t, "node-a")
	a := n.startAgent(c)
	waitStatus := func(what, resolvedReason string) {
		t.Helper()
		start := time.Now()
		eventually(t, 10*time.Second, func() error {
			ours, all, gen, err := c.routeParents("web-split")
			if err != nil {
				return err
			}
			if ours == nil {
				return fmt.Errorf("no entry of %s in %v", routestatus.ControllerName, all)
			}
			if st, reason, obs := conditionOf(ours, "Accepted"); st != "True" || reason != "Accepted" || obs != gen {
				return fmt.Errorf("Accepted %s/%s at generation %d, want True/Accepted at %d", st, reason, obs, gen)
			}
			if _, reason, obs := conditionOf(ours, "ResolvedRefs"); reason != resolvedReason || obs != gen {
				return fmt.Errorf("ResolvedRefs %s at generation %d, want %s at %d", reason, obs, resolvedReason, gen)
			}
			if len(all) != 2 || fmt.Sprint(all[0]) != fmt.Sprint(theirs) {
				return fmt.Errorf("status.parents %v, want the gateway controller's entry first, as it was, then ours", all)
			}
			return nil
		})
		t.Logf("%s: status as expected %s after the change", what, time.Since(start).Round(time.Millisecond))
	}
	waitStatus("route created before the agent", "BackendNotFound")

	c.createService("web-v2", corev1.ServiceSpec{Ports: webPorts[:1], Selector: map[string]string{"app": "web-v2"}})
	waitStatus("missing backend Service created", "ResolvedRefs")

	c.applyRoute(httpRoute(c.ns, "web-split", "web", map[string]int64{"web-v1": 50, "web-v2": 50}))
	// (the Gateway parent is gone from the spec: the gateway controller's
	// entry stays, it is not ours to remove)
	waitStatus("route re-weighted (generation 2)", "ResolvedRefs")

	if got := a.metric("lbstate_route_status_writes_total", "result", "written"); got != 3 {
		t.Errorf("%v status writes, want 3 (one per change)", got)
	}
	if got := a.metric("lbstate_route_status_leader"); got != 1 {
		t.Errorf("leader gauge %v, want 1", got)
	}
	lease, err := c.kube.CoordinationV1().Leases("kube-system").Get(c.ctx(), "lbstate-route-status", metav1.GetOptions{})
	check(t, err)
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Errorf("lease %+v, want held", lease.Spec)
	}
}

// controlPlane is a second agent's control plane on the same API server
// (its sources, tables and route status, without maps or a datapath):
// enough to campaign for the route status Lease and write.
type controlPlane struct {
	h        *hive.Hive
	log      *slog.Logger
	registry *prometheus.Registry
	stopped  bool
}

func startControlPlane(t *testing.T, c *cluster, args ...string) *controlPlane {
	t.Helper()
	cp := &controlPlane{log: slog.New(slog.DiscardHandler)}
	clients := kubeClients(t, c)
	cp.h = hive.New(statedb.Cell, job.Cell, cell.SimpleHealthCell, metrics.Cell, tables.Cell,
		kubeapi.Cell, k8s.Cell, routes.Cell, routestatus.Cell,
		cell.Provide(func() kubeapi.Clients { return clients }),
		cell.Invoke(func(reg *prometheus.Registry) { cp.registry = reg }))
	flags := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	cp.h.RegisterFlags(flags)
	check(t, flags.Parse(args))
	check(t, cp.h.Start(cp.log, context.Background()))
	t.Cleanup(cp.stop)
	return cp
}

func (cp *controlPlane) stop() {
	if !cp.stopped {
		cp.stopped = true
		_ = cp.h.Stop(cp.log, context.Background())
	}
}

// counter returns a counter or gauge of reg (labels as name=value pairs).
func counter(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	a := &agent{t: t, registry: reg}
	return a.metric(name, labels...)
}

// Two agents on one API server and one Lease: exactly one writes route
// status; when it stops, the other takes over (the Lease released, not
// expired) and writes what changed meanwhile.
func TestRouteStatusWriterFailsOverToTheOtherAgent(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	for _, name := range []string{"web", "web-v1", "web-v2", "api", "api-v1"} {
		c.createService(name, corev1.ServiceSpec{Ports: webPorts[:1], Selector: map[string]string{"app": name}})
	}
	c.applyRoute(httpRoute(c.ns, "web-split", "web", map[string]int64{"web-v1": 90, "web-v2": 10}))
	lease := "--route-status-lease-duration=3s"
	n := newNode(t, "node-a")
	a := n.startAgent(c, "--route-status-identity=node-a", lease)
	resolved := func(route string) func() error {
		return func() error {
			ours, all, gen, err := c.routeParents(route)
			if err != nil {
				return err
			}
			if _, reason, obs := conditionOf(ours, "ResolvedRefs"); reason != "ResolvedRefs" || obs != gen {
				return fmt.Errorf("route %s: status.parents %v, want ours ResolvedRefs at generation %d", route, all, gen)
			}
			return nil
		}
	}
	eventually(t, 10*time.Second, resolved("web-split"))
	b := startControlPlane(t, c, "--k8s-node-name=node-b", "--route-status-identity=node-b", lease)
	eventually(t, 10*time.Second, func() error { // then node-b campaigns
		if v := counter(t, b.registry, "lbstate_source_synced", "source", "k8s"); v != 1 {
			return fmt.Errorf("node-b's source synced: %v", v)
		}
		return nil
	})
	c.applyRoute(httpRoute(c.ns, "api-split", "api", map[string]int64{"api-v1": 1}))
	eventually(t, 10*time.Second, resolved("api-split"))
	// Both agents computed it; only the lease holder wrote.
	if wa, wb := a.metric("lbstate_route_status_writes_total", "result", "written"), counter(t, b.registry, "lbstate_route_status_writes_total", "result", "written"); wa != 2 || wb != 0 {
		t.Errorf("writes: node-a %v, node-b %v; want 2 and 0", wa, wb)
	}
	if la, lb := a.metric("lbstate_route_status_leader"), counter(t, b.registry, "lbstate_route_status_leader"); la != 1 || lb != 0 {
		t.Errorf("leader gauges: node-a %v, node-b %v; want 1 and 0", la, lb)
	}

	stopped := time.Now()
	a.stop()
	c.applyRoute(httpRoute(c.ns, "api-split", "api", map[string]int64{"api-v1": 2}))
	eventually(t, 10*time.Second, resolved("api-split"))
	t.Logf("node-b wrote the change %s after node-a stopped (lease duration 3s)", time.Since(stopped).Round(time.Millisecond))
	if wb := counter(t, b.registry, "lbstate_route_status_writes_total", "result", "written"); wb != 1 {
		t.Errorf("node-b wrote %v times, want 1 (the change; web-split is as it should be)", wb)
	}
	l, err := c.kube.CoordinationV1().Leases("kube-system").Get(c.ctx(), "lbstate-route-status", metav1.GetOptions{})
	check(t, err)
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "node-b" {
		t.Errorf("lease holder %v, want node-b", l.Spec.HolderIdentity)
	}
}
