package e2e

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// createNode creates the Node of the agent's node (its address towards
// the external host, and labels), as a kubelet would.
func (c *cluster) createNode(name string, labels map[string]string) {
	c.t.Helper()
	node, err := c.kube.CoreV1().Nodes().Create(c.ctx(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	check(c.t, err)
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: nodeIP}, {Type: corev1.NodeInternalIP, Address: nodeIPv6}}
	_, err = c.kube.CoreV1().Nodes().UpdateStatus(c.ctx(), node, metav1.UpdateOptions{})
	check(c.t, err)
}

// setIngress writes a LoadBalancer Service's ingress IP, as a cloud
// controller would.
func (c *cluster) setIngress(name, ip string) {
	c.t.Helper()
	svc, err := c.kube.CoreV1().Services(c.ns).Get(c.ctx(), name, metav1.GetOptions{})
	check(c.t, err)
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
	_, err = c.kube.CoreV1().Services(c.ns).UpdateStatus(c.ctx(), svc, metav1.UpdateOptions{})
	check(c.t, err)
}

// NodePort and LoadBalancer traffic from outside the node reaches the
// endpoints; with externalTrafficPolicy Local only this node's, while
// in-cluster traffic still reaches all; with internalTrafficPolicy Local
// in-cluster traffic reaches only this node's.
func TestNodePortAndLoadBalancerFollowTheTrafficPolicies(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	n := newNode(t, "node-a")
	c.createNode(n.name, nil)
	a := n.startAgent(c)
	local, remote := n.newPod("local", 8080), n.newPod("remote", 8080)
	const lbIP = "203.0.113.10"
	svc := c.createService("web", corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: webPorts, Selector: map[string]string{"app": "web"}})
	c.setIngress("web", lbIP)
	c.setSlice("web", "web-1", webSlicePorts, ready(local, n.name), ready(remote, "node-b"))
	ip, nodePort := svc.Spec.ClusterIP, svc.Spec.Ports[0].NodePort
	both := []string{local.ip + ":8080", remote.ip + ":8080"}
	// Every frontend the connections below use: the reconciler may write
	// one before another.
	a.waitFrontend(fmtAddr(lbIP, 80, "TCP"), 10*time.Second, both...)
	a.waitFrontend(fmtAddr(nodeIP, nodePort, "TCP"), 10*time.Second, both...)

	outside := client{n, viaExternal}
	nodePortLine, nodePortPeer := fmt.Sprintf("tcp %s:%d 60", nodeIP, nodePort), fmt.Sprintf("%s:%d", nodeIP, nodePort)
	lbLine, lbPeer := fmt.Sprintf("tcp %s:80 60", lbIP), lbIP+":80"
	clusterLine, clusterPeer := fmt.Sprintf("tcp %s:80 60", ip), ip+":80"
	wantAnswers(t, "NodePort from outside", answers(t, outside, nodePortLine, nodePortPeer), "local", "remote")
	wantAnswers(t, "LoadBalancer from outside", answers(t, outside, lbLine, lbPeer), "local", "remote")

	c.updateService("web", func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal })
	a.waitFrontend(fmtAddr(lbIP, 80, "TCP"), 5*time.Second, local.ip+":8080")
	a.waitFrontend(fmtAddr(nodeIP, nodePort, "TCP"), 5*time.Second, local.ip+":8080")
	wantAnswers(t, "NodePort from outside, externalTrafficPolicy Local", answers(t, outside, nodePortLine, nodePortPeer), "local")
	wantAnswers(t, "LoadBalancer from outside, externalTrafficPolicy Local", answers(t, outside, lbLine, lbPeer), "local")
	for _, from := range n.insideClients() {
		wantAnswers(t, "ClusterIP from "+from.String()+", externalTrafficPolicy Local", answers(t, from, clusterLine, clusterPeer), "local", "remote")
	}

	c.updateService("web", func(s *corev1.Service) { s.Spec.InternalTrafficPolicy = new(corev1.ServiceInternalTrafficPolicyLocal) })
	a.waitFrontend(fmtAddr(ip, 80, "TCP"), 5*time.Second, local.ip+":8080")
	for _, from := range n.insideClients() {
		wantAnswers(t, "ClusterIP from "+from.String()+", internalTrafficPolicy Local", answers(t, from, clusterLine, clusterPeer), "local")
	}
}
