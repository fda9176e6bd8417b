package e2e

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const zoneLabel = "topology.kubernetes.io/zone"

// relabel sets a Node's zone label through the API.
func (c *cluster) relabel(node, zone string) {
	c.t.Helper()
	eventually(c.t, 10*time.Second, func() error {
		n, err := c.kube.CoreV1().Nodes().Get(c.ctx(), node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Labels[zoneLabel] = zone
		_, err = c.kube.CoreV1().Nodes().Update(c.ctx(), n, metav1.UpdateOptions{})
		return err
	})
}

// trafficDistribution PreferSameZone keeps new connections in the
// node's zone by the slices' hints, and follows the node when the API
// relabels it into another zone.
func TestPreferSameZoneFollowsHintsAndTheNodesZone(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	n := newNode(t, "node-a")
	c.createNode("node-a", map[string]string{zoneLabel: "zone-a"})
	c.createNode("node-b", map[string]string{zoneLabel: "zone-b"})
	a := n.startAgent(c)
	za, zb := n.newPod("in-zone-a", 8080), n.newPod("in-zone-b", 8080)
	svc := c.createService("web", corev1.ServiceSpec{
		Ports: webPorts, Selector: map[string]string{"app": "web"},
		TrafficDistribution: new(corev1.ServiceTrafficDistributionPreferSameZone),
	})
	c.setSlice("web", "web-1", webSlicePorts,
		endpoint{pod: za, node: "node-a", zone: "zone-a", hintZones: []string{"zone-a"}},
		endpoint{pod: zb, node: "node-b", zone: "zone-b", hintZones: []string{"zone-b"}})
	ip := svc.Spec.ClusterIP
	fe, line, peer := fmtAddr(ip, 80, "TCP"), fmt.Sprintf("tcp %s:80 30", ip), ip+":80"
	a.waitFrontend(fe, 10*time.Second, za.ip+":8080")
	for _, from := range n.insideClients() {
		wantAnswers(t, "in zone-a, from "+from.String(), answers(t, from, line, peer), "in-zone-a")
	}

	c.relabel("node-a", "zone-b")
	a.waitFrontend(fe, 5*time.Second, zb.ip+":8080")
	for _, from := range n.insideClients() {
		wantAnswers(t, "relabelled into zone-b, from "+from.String(), answers(t, from, line, peer), "in-zone-b")
	}
}

// lbstate.io/topology-keys: the node's own endpoints first, then its
// zone's, then any; the zone is the one the API says the nodes are in.
func TestTopologyKeysPreferThisNodeThenItsZoneByTheNodesLabels(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	n := newNode(t, "node-a")
	c.createNode("node-a", map[string]string{zoneLabel: "zone-a"})
	c.createNode("node-b", map[string]string{zoneLabel: "zone-a"})
	c.createNode("node-c", map[string]string{zoneLabel: "zone-c"})
	a := n.startAgent(c)
	here, near, far := n.newPod("on-node-a", 8080), n.newPod("on-node-b", 8080), n.newPod("on-node-c", 8080)
	svc, err := c.kube.CoreV1().Services(c.ns).Create(c.ctx(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: c.ns, Annotations: map[string]string{
			"lbstate.io/topology-keys": "kubernetes.io/hostname," + zoneLabel + ",*",
		}},
		Spec: corev1.ServiceSpec{Ports: webPorts, Selector: map[string]string{"app": "web"}},
	}, metav1.CreateOptions{})
	check(t, err)
	c.setSlice("web", "web-1", webSlicePorts, ready(here, "node-a"), ready(near, "node-b"), ready(far, "node-c"))
	ip := svc.Spec.ClusterIP
	fe, line, peer := fmtAddr(ip, 80, "TCP"), fmt.Sprintf("tcp %s:80 30", ip), ip+":80"
	a.waitFrontend(fe, 10*time.Second, here.ip+":8080")
	for _, from := range n.insideClients() {
		wantAnswers(t, "with an endpoint on this node, from "+from.String(), answers(t, from, line, peer), "on-node-a")
	}

	c.setSlice("web", "web-1", webSlicePorts, ready(near, "node-b"), ready(far, "node-c"))
	a.waitFrontend(fe, 5*time.Second, near.ip+":8080")
	for _, from := range n.insideClients() {
		wantAnswers(t, "with an endpoint in this zone, from "+from.String(), answers(t, from, line, peer), "on-node-b")
	}

	c.relabel("node-a", "zone-c")
	a.waitFrontend(fe, 5*time.Second, far.ip+":8080")
	for _, from := range n.insideClients() {
		wantAnswers(t, "after this node moved to zone-c, from "+from.String(), answers(t, from, line, peer), "on-node-c")
	}
}
