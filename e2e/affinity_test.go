package e2e

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// With sessionAffinity ClientIP, one client keeps its pod over many
// connections, from a pod (tc, by client address) and from a process of
// the node (socket LB, by network namespace); when that pod leaves the
// slice the client moves to another and never comes back to it; after
// the timeout its connections still work.
func TestSessionAffinityKeepsAClientOnItsPodButNeverOnARemovedOne(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	n := newNode(t, "node-a")
	a := n.startAgent(c)
	pods := map[string]*pod{}
	var eps []endpoint
	for _, name := range []string{"web-1", "web-2", "web-3"} {
		pods[name] = n.newPod(name, 8080)
		eps = append(eps, ready(pods[name], n.name))
	}
	const timeout = 3
	svc := c.createService("web", corev1.ServiceSpec{
		Ports: webPorts, Selector: map[string]string{"app": "web"},
		SessionAffinity:       corev1.ServiceAffinityClientIP,
		SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: new(int32(timeout))}},
	})
	c.setSlice("web", "web-1", webSlicePorts, eps...)
	ip := svc.Spec.ClusterIP
	fe := fmtAddr(ip, 80, "TCP")
	a.waitFrontend(fe, 10*time.Second, pods["web-1"].ip+":8080", pods["web-2"].ip+":8080", pods["web-3"].ip+":8080")
	line, peer := fmt.Sprintf("tcp %s:80 30", ip), ip+":80"

	only := func(what string, got map[string]int) string {
		t.Helper()
		if len(got) != 1 {
			t.Fatalf("%s: answered by %v, want one pod for all", what, got)
		}
		return slices.Collect(maps.Keys(got))[0]
	}
	for _, from := range n.insideClients() {
		pinned := only("30 connections from "+from.String(), answers(t, from, line, peer))

		var rest []endpoint
		var want []string
		for name, p := range pods {
			if name != pinned {
				rest = append(rest, ready(p, n.name))
				want = append(want, p.ip+":8080")
			}
		}
		c.setSlice("web", "web-1", webSlicePorts, rest...)
		a.waitFrontend(fe, 5*time.Second, want...)
		moved := only("30 connections from "+from.String()+" after its pod "+pinned+" left", answers(t, from, line, peer))
		if moved == pinned {
			t.Fatalf("from %s: connections still reach %s, removed from the slice", from, pinned)
		}

		time.Sleep(time.Duration(timeout)*time.Second + 500*time.Millisecond) // the affinity expires
		got := answers(t, from, line, peer)
		if got[pinned] > 0 {
			t.Fatalf("from %s, after the affinity timeout: %v, including the removed %s", from, got, pinned)
		}
		c.setSlice("web", "web-1", webSlicePorts, eps...)
		a.waitFrontend(fe, 5*time.Second, pods["web-1"].ip+":8080", pods["web-2"].ip+":8080", pods["web-3"].ip+":8080")
	}
}
