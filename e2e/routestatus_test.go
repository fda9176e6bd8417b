package e2e

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lbstate/lbstate/reflectors/routestatus"
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
