package e2e

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// newWebService starts a cluster, a node with its agent, and a Service
// web (webPorts) whose one slice holds the given pods, ready; it returns
// the ClusterIP once the agent has it in the maps.
func newWebService(t *testing.T, names ...string) (*cluster, *node, *agent, []*pod, string) {
	c := newCluster(t, clusterOptions{})
	n := newNode(t, "node-a")
	a := n.startAgent(c)
	var pods []*pod
	var eps []endpoint
	var want []string
	for _, name := range names {
		p := n.newPod(name, 8080)
		pods = append(pods, p)
		eps = append(eps, ready(p, n.name))
		want = append(want, p.ip+":8080")
	}
	svc := c.createService("web", corev1.ServiceSpec{Ports: webPorts, Selector: map[string]string{"app": "web"}})
	c.setSlice("web", "web-1", webSlicePorts, eps...)
	a.waitFrontend(fmtAddr(svc.Spec.ClusterIP, 80, "TCP"), 10*time.Second, want...)
	return c, n, a, pods, svc.Spec.ClusterIP
}

// As a slice scales up and down, new connections reach only the current
// endpoints, within a second of the update's write.
func TestScaledEndpointsTakeNewConnectionsWithinASecond(t *testing.T) {
	c, n, a, pods, ip := newWebService(t, "web-1", "web-2")
	more := []*pod{n.newPod("web-3", 8080), n.newPod("web-4", 8080)}
	fe := fmtAddr(ip, 80, "TCP")
	line := fmt.Sprintf("tcp %s:80 60", ip)

	// From the write's call: the watch event can reach the agent before
	// the API server's answer reaches the caller.
	start := time.Now()
	c.setSlice("web", "web-1", webSlicePorts,
		ready(pods[0], n.name), ready(pods[1], n.name), ready(more[0], n.name), ready(more[1], n.name))
	a.waitFrontend(fe, time.Second, pods[0].ip+":8080", pods[1].ip+":8080", more[0].ip+":8080", more[1].ip+":8080")
	t.Logf("scaled up to 4 endpoints: in the maps %s after the write's call", time.Since(start))
	for _, from := range n.insideClients() {
		wantAnswers(t, "after scaling up, from "+from.String(), answers(t, from, line, ip+":80"), "web-1", "web-2", "web-3", "web-4")
	}

	start = time.Now()
	c.setSlice("web", "web-1", webSlicePorts, ready(more[1], n.name))
	a.waitFrontend(fe, time.Second, more[1].ip+":8080")
	t.Logf("scaled down to 1 endpoint: in the maps %s after the write's call", time.Since(start))
	for _, from := range n.insideClients() {
		wantAnswers(t, "after scaling down, from "+from.String(), answers(t, from, line, ip+":80"), "web-4")
	}
}

// An established connection to an endpoint that turns terminating keeps
// working while new connections go to the ready ones; once every
// endpoint is terminating (and serving), new connections use them.
func TestTerminatingEndpointsKeepTheirConnectionsAndServeAsLastResort(t *testing.T) {
	c, n, a, pods, ip := newWebService(t, "web-1", "web-2")
	fe := fmtAddr(ip, 80, "TCP")
	to := ip + ":80"

	// Connections from the client pod until one lands on each pod.
	open := map[string]*conn{}
	for i := 0; len(open) < 2 && i < 200; i++ {
		p, name := dial(t, n.client, to)
		if open[name] == nil {
			open[name] = p
		}
	}
	if open["web-1"] == nil || open["web-2"] == nil {
		t.Fatalf("200 connections did not reach both pods: %v", open)
	}

	c.setSlice("web", "web-1", webSlicePorts, endpoint{pod: pods[0], node: n.name, terminating: true}, ready(pods[1], n.name))
	a.waitFrontend(fe, 5*time.Second, pods[1].ip+":8080")
	line := fmt.Sprintf("tcp %s 60", to)
	for _, from := range n.insideClients() {
		wantAnswers(t, "with web-1 terminating, from "+from.String(), answers(t, from, line, to), "web-2")
	}
	for name, p := range open {
		if got, err := p.ask(); err != nil || got != name {
			t.Fatalf("the connection established to %s, after web-1 turned terminating: answered %q, %v", name, got, err)
		}
	}

	c.setSlice("web", "web-1", webSlicePorts,
		endpoint{pod: pods[0], node: n.name, terminating: true}, endpoint{pod: pods[1], node: n.name, terminating: true})
	a.waitFrontend(fe, 5*time.Second, pods[0].ip+":8080", pods[1].ip+":8080")
	for _, from := range n.insideClients() {
		wantAnswers(t, "with every endpoint terminating and serving, from "+from.String(), answers(t, from, line, to), "web-1", "web-2")
	}
	if got, err := open["web-1"].ask(); err != nil || got != "web-1" {
		t.Fatalf("the connection to web-1, with every endpoint terminating: answered %q, %v", got, err)
	}

	// Terminating and no longer serving: no new connections at all.
	c.setSlice("web", "web-1", webSlicePorts,
		endpoint{pod: pods[0], node: n.name, terminating: true, notServing: true}, endpoint{pod: pods[1], node: n.name, terminating: true})
	a.waitFrontend(fe, 5*time.Second, pods[1].ip+":8080")
	for _, from := range n.insideClients() {
		wantAnswers(t, "with web-1 terminating and not serving, from "+from.String(), answers(t, from, line, to), "web-2")
	}
}
