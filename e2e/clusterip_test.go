package e2e

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Over many connections to a ClusterIP, TCP and UDP, from a pod (tc) and
// from a process of the node (socket LB), every ready endpoint answers
// and no other: not a not-ready pod, not a pod outside the slice.
func TestClusterIPReachesEveryReadyEndpointAndNoOther(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	n := newNode(t, "node-a")
	a := n.startAgent(c)
	pods := []*pod{n.newPod("web-1", 8080), n.newPod("web-2", 8080), n.newPod("web-3", 8080), n.newPod("web-unready", 8080)}
	n.newPod("stranger", 8080) // serves the port, in no slice

	svc := c.createService("web", corev1.ServiceSpec{Ports: webPorts, Selector: map[string]string{"app": "web"}})
	c.setSlice("web", "web-1", webSlicePorts,
		ready(pods[0], n.name), ready(pods[1], n.name), ready(pods[2], n.name),
		endpoint{pod: pods[3], node: n.name, notReady: true})
	ip := svc.Spec.ClusterIP
	a.waitFrontend(fmtAddr(ip, 80, "TCP"), 10*time.Second, pods[0].ip+":8080", pods[1].ip+":8080", pods[2].ip+":8080")
	a.waitFrontend(fmtAddr(ip, 53, "UDP"), 10*time.Second, pods[0].ip+":8080", pods[1].ip+":8080", pods[2].ip+":8080")

	for _, from := range n.insideClients() {
		for _, proto := range []struct{ line, peer string }{
			{fmt.Sprintf("tcp %s:80 60", ip), ip + ":80"},
			{fmt.Sprintf("udp %s:53 60", ip), ip + ":53"},
		} {
			got := answers(t, from, proto.line, proto.peer)
			wantAnswers(t, proto.line+" from "+from.String(), got, "web-1", "web-2", "web-3")
		}
	}
}
