package e2e

import (
	"fmt"
	"math"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lbstate/lbstate/lb"
)

var httpRoutes = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"}

// httpRoute is a GAMMA HTTPRoute on Service parent (port 80) splitting
// between backend Services by weight.
func httpRoute(ns, name, parent string, backends map[string]int64) *unstructured.Unstructured {
	var refs []any
	for svc, w := range backends {
		refs = append(refs, map[string]any{"name": svc, "port": int64(80), "weight": w})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1",
		"kind":       "HTTPRoute",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"parentRefs": []any{map[string]any{"group": "", "kind": "Service", "name": parent, "port": int64(80)}},
			"rules":      []any{map[string]any{"backendRefs": refs}},
		},
	}}
}

// applyRoute creates or replaces an HTTPRoute.
func (c *cluster) applyRoute(u *unstructured.Unstructured) {
	c.t.Helper()
	routes := c.dyn.Resource(httpRoutes).Namespace(c.ns)
	eventually(c.t, 10*time.Second, func() error {
		old, err := routes.Get(c.ctx(), u.GetName(), metav1.GetOptions{})
		if err != nil {
			_, err = routes.Create(c.ctx(), u, metav1.CreateOptions{})
			return err
		}
		u.SetResourceVersion(old.GetResourceVersion())
		_, err = routes.Update(c.ctx(), u, metav1.UpdateOptions{})
		return err
	})
}

// shares returns the share of new flows (weights) of each group of
// backend addresses of a frontend.
func shares(fe *lb.Frontend, groups map[string][]string) map[string]float64 {
	group := map[string]string{}
	for g, addrs := range groups {
		for _, a := range addrs {
			group[a] = g
		}
	}
	out, sum := map[string]float64{}, 0.0
	for _, b := range fe.Backends {
		out[group[b.Address.AddrPort().String()]] += float64(b.Weight)
		sum += float64(b.Weight)
	}
	for g := range out {
		out[g] /= sum
	}
	return out
}

// An HTTPRoute splitting a Service 90/10 between two versions: over 1,000
// real connections each version takes its share (within what chance
// allows), and
// the apex Service's own pod none; weights shifted by the test move new
// connections within a second; deleting the route restores the apex.
func TestHTTPRouteSplitsRealConnectionsByWeight(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	n := newNode(t, "node-a")
	a := n.startAgent(c)
	apex, v1, v2 := n.newPod("apex", 8080), n.newPod("v1", 8080), n.newPod("v2", 8080)
	var ip string
	for name, p := range map[string]*pod{"web": apex, "web-v1": v1, "web-v2": v2} {
		svc := c.createService(name, corev1.ServiceSpec{Ports: webPorts[:1], Selector: map[string]string{"app": name}})
		c.setSlice(name, name+"-1", webSlicePorts[:1], ready(p, n.name))
		if name == "web" {
			ip = svc.Spec.ClusterIP
		}
	}
	fe := fmtAddr(ip, 80, "TCP")
	a.waitFrontend(fe, 10*time.Second, apex.ip+":8080")
	groups := map[string][]string{"v1": {v1.ip + ":8080"}, "v2": {v2.ip + ":8080"}}
	waitShares := func(timeout time.Duration, v1Share float64) {
		a.waitFrontendFunc(fe, timeout, func(f *lb.Frontend) error {
			if got := shares(f, groups); math.Abs(got["v1"]-v1Share) > 0.01 || math.Abs(got["v2"]-(1-v1Share)) > 0.01 {
				return fmt.Errorf("shares %v, want v1 %.2f and v2 %.2f", got, v1Share, 1-v1Share)
			}
			return nil
		})
	}
	checkSplit := func(v1Share float64) {
		t.Helper()
		for _, from := range n.insideClients() {
			got := answers(t, from, fmt.Sprintf("tcp %s:80 1000", ip), ip+":80")
			if got["apex"] > 0 || got["v1"]+got["v2"] != 1000 {
				t.Fatalf("from %s: answered by %v, want only v1 and v2", from, got)
			}
			// Each connection picks on its own: v1's count is a binomial
			// draw, checked within 4.5 standard deviations (a false
			// alarm once in ~150,000 checks; 6.1 points at 30%, 4.3 at
			// 90%), where a weight off by 10 points is 7 deviations out.
			tolerance := 4.5 * math.Sqrt(v1Share*(1-v1Share)/1000)
			if share := float64(got["v1"]) / 1000; math.Abs(share-v1Share) > tolerance {
				t.Fatalf("from %s: v1 took %.1f%% of 1,000 connections, want %.0f%% ± %.1f points (%v)", from, 100*share, 100*v1Share, 100*tolerance, got)
			}
		}
	}

	c.applyRoute(httpRoute(c.ns, "web-split", "web", map[string]int64{"web-v1": 90, "web-v2": 10}))
	waitShares(10*time.Second, 0.9)
	checkSplit(0.9)

	start := time.Now()
	c.applyRoute(httpRoute(c.ns, "web-split", "web", map[string]int64{"web-v1": 30, "web-v2": 70}))
	waitShares(time.Second, 0.3)
	t.Logf("re-weighted route in the maps %s after the write's call", time.Since(start))
	checkSplit(0.3)

	check(t, c.dyn.Resource(httpRoutes).Namespace(c.ns).Delete(c.ctx(), "web-split", metav1.DeleteOptions{}))
	a.waitFrontend(fe, 5*time.Second, apex.ip+":8080")
	for _, from := range n.insideClients() {
		wantAnswers(t, "without the route, from "+from.String(), answers(t, from, fmt.Sprintf("tcp %s:80 20", ip), ip+":80"), "apex")
	}
}
