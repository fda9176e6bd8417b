package e2e

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var redirectPolicies = schema.GroupVersionResource{Group: "cilium.io", Version: "v2", Resource: "ciliumlocalredirectpolicies"}

// createPod creates the Pod of p on node with labels and container
// ports, running and ready, as the scheduler and the kubelet would.
func (c *cluster) createPod(p *pod, node string, labels map[string]string, ports ...corev1.ContainerPort) {
	c.t.Helper()
	obj, err := c.kube.CoreV1().Pods(c.ns).Create(c.ctx(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: c.ns, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name: "server", Image: "e2e.lbstate.io/name-server", Ports: ports,
		}}},
	}, metav1.CreateOptions{})
	check(c.t, err)
	obj.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: p.ip, PodIPs: []corev1.PodIP{{IP: p.ip}, {IP: p.ipv6}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
	}
	_, err = c.kube.CoreV1().Pods(c.ns).UpdateStatus(c.ctx(), obj, metav1.UpdateOptions{})
	check(c.t, err)
}

// redirectPort is a port of a redirect policy's backend: its name (the
// Service port's), number and protocol.
type redirectPort struct{ name, port, proto string }

// redirectPolicy is a CiliumLocalRedirectPolicy named after service that
// redirects its ports to this node's pods labelled app.
func redirectPolicy(ns, service, app string, ports ...redirectPort) *unstructured.Unstructured {
	var toPorts []any
	for _, p := range ports {
		toPorts = append(toPorts, map[string]any{"port": p.port, "protocol": p.proto, "name": p.name})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cilium.io/v2",
		"kind":       "CiliumLocalRedirectPolicy",
		"metadata":   map[string]any{"name": service, "namespace": ns},
		"spec": map[string]any{
			"redirectFrontend": map[string]any{"serviceMatcher": map[string]any{"serviceName": service, "namespace": ns}},
			"redirectBackend": map[string]any{
				"localEndpointSelector": map[string]any{"matchLabels": map[string]any{"app": app}},
				"toPorts":               toPorts,
			},
		},
	}}
}

// A CiliumLocalRedirectPolicy for node-local DNS: queries to the DNS
// Service's ClusterIP are answered by the node's local DNS pod while the
// policy stands; removing it restores the Service's own endpoints.
func TestLocalRedirectPolicySendsDNSToTheNodeLocalPod(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	n := newNode(t, "node-a")
	a := n.startAgent(c)
	dns1, dns2, local := n.newPod("dns-1", 8053), n.newPod("dns-2", 8053), n.newPod("node-local-dns", 8053)
	c.createPod(local, n.name, map[string]string{"app": "node-local-dns"},
		corev1.ContainerPort{Name: "dns", ContainerPort: 8053, Protocol: corev1.ProtocolUDP},
		corev1.ContainerPort{Name: "dns-tcp", ContainerPort: 8053, Protocol: corev1.ProtocolTCP})
	svc := c.createService("kube-dns", corev1.ServiceSpec{Selector: map[string]string{"app": "kube-dns"}, Ports: []corev1.ServicePort{
		servicePort("dns", corev1.ProtocolUDP, 53, intOrPort(8053)),
		servicePort("dns-tcp", corev1.ProtocolTCP, 53, intOrPort(8053)),
	}})
	c.setSlice("kube-dns", "kube-dns-1", sliceDNSPorts, ready(dns1, "node-b"), ready(dns2, "node-b"))
	ip := svc.Spec.ClusterIP
	fe := fmtAddr(ip, 53, "UDP")
	a.waitFrontend(fe, 10*time.Second, dns1.ip+":8053", dns2.ip+":8053")
	query := func(what string, want ...string) {
		t.Helper()
		for _, from := range n.insideClients() {
			wantAnswers(t, what+", UDP from "+from.String(), answers(t, from, fmt.Sprintf("udp %s:53 30", ip), ip+":53"), want...)
			wantAnswers(t, what+", TCP from "+from.String(), answers(t, from, fmt.Sprintf("tcp %s:53 30", ip), ip+":53"), want...)
		}
	}
	query("before the policy", "dns-1", "dns-2")

	policy := redirectPolicy(c.ns, "kube-dns", "node-local-dns",
		redirectPort{"dns", "8053", "UDP"}, redirectPort{"dns-tcp", "8053", "TCP"})
	_, err := c.dyn.Resource(redirectPolicies).Namespace(c.ns).Create(c.ctx(), policy, metav1.CreateOptions{})
	check(t, err)
	a.waitFrontend(fe, 5*time.Second, local.ip+":8053")
	a.waitFrontend(fmtAddr(ip, 53, "TCP"), 5*time.Second, local.ip+":8053")
	query("with the policy", "node-local-dns")

	check(t, c.dyn.Resource(redirectPolicies).Namespace(c.ns).Delete(c.ctx(), "kube-dns", metav1.DeleteOptions{}))
	a.waitFrontend(fe, 5*time.Second, dns1.ip+":8053", dns2.ip+":8053")
	a.waitFrontend(fmtAddr(ip, 53, "TCP"), 5*time.Second, dns1.ip+":8053", dns2.ip+":8053")
	query("after the policy is removed", "dns-1", "dns-2")
}
