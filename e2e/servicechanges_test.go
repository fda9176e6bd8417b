package e2e

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// A Service changed from ClusterIP to NodePort to LoadBalancer and back
// is reachable from outside exactly while its type says so, and from
// inside throughout; a changed port moves its frontend.
func TestServiceTypeAndPortChangesMoveItsFrontends(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	n := newNode(t, "node-a")
	c.createNode(n.name, nil)
	a := n.startAgent(c)
	p := n.newPod("web-1", 8080)
	svc := c.createService("web", corev1.ServiceSpec{Ports: webPorts, Selector: map[string]string{"app": "web"}})
	c.setSlice("web", "web-1", webSlicePorts, ready(p, n.name))
	ip, be := svc.Spec.ClusterIP, p.ip+":8080"
	a.waitFrontend(fmtAddr(ip, 80, "TCP"), 10*time.Second, be)
	inside := func(port int32) {
		t.Helper()
		for _, from := range n.insideClients() {
			wantAnswers(t, fmt.Sprintf("port %d from %s", port, from), answers(t, from, fmt.Sprintf("tcp %s:%d 10", ip, port), fmt.Sprintf("%s:%d", ip, port)), "web-1")
		}
	}
	outside := client{n, viaExternal}

	svc = c.updateService("web", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort })
	nodePort := svc.Spec.Ports[0].NodePort
	a.waitFrontend(fmtAddr("0.0.0.0", nodePort, "TCP"), 5*time.Second, be)
	wantAnswers(t, "NodePort from outside", answers(t, outside, fmt.Sprintf("tcp %s:%d 10", nodeIP, nodePort), fmt.Sprintf("%s:%d", nodeIP, nodePort)), "web-1")

	const lbIP = "203.0.113.20"
	c.updateService("web", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer })
	c.setIngress("web", lbIP)
	a.waitFrontend(fmtAddr(lbIP, 80, "TCP"), 5*time.Second, be)
	wantAnswers(t, "LoadBalancer from outside", answers(t, outside, fmt.Sprintf("tcp %s:80 10", lbIP), lbIP+":80"), "web-1")

	c.updateService("web", func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeClusterIP
		s.Spec.ExternalTrafficPolicy = ""
		s.Spec.AllocateLoadBalancerNodePorts = nil
		for i := range s.Spec.Ports {
			s.Spec.Ports[i].NodePort = 0
		}
	})
	a.waitNoFrontend(fmtAddr(lbIP, 80, "TCP"), 5*time.Second)
	a.waitNoFrontend(fmtAddr("0.0.0.0", nodePort, "TCP"), 5*time.Second)
	inside(80)

	c.updateService("web", func(s *corev1.Service) { s.Spec.Ports[0].Port = 81 })
	a.waitFrontend(fmtAddr(ip, 81, "TCP"), 5*time.Second, be)
	a.waitNoFrontend(fmtAddr(ip, 80, "TCP"), 5*time.Second)
	inside(81)
}

// A named targetPort that resolves to different ports on different pods
// (one slice per port, as the EndpointSlice controller writes them), on
// a Service of several ports: each port reaches each pod on its own
// container port.
func TestNamedTargetPortsAndMultiplePortsReachEachPodOnItsOwnPort(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	n := newNode(t, "node-a")
	a := n.startAgent(c)
	p1, p2 := n.newPod("web-1", 8080, 9090), n.newPod("web-2", 8081, 9090)
	svc := c.createService("web", corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{
		servicePort("http", corev1.ProtocolTCP, 80, intstr.FromString("web")),
		servicePort("admin", corev1.ProtocolTCP, 90, intstr.FromInt32(9090)),
	}})
	c.setSlice("web", "web-8080", []discoveryv1.EndpointPort{slicePort("http", corev1.ProtocolTCP, 8080), slicePort("admin", corev1.ProtocolTCP, 9090)}, ready(p1, n.name))
	c.setSlice("web", "web-8081", []discoveryv1.EndpointPort{slicePort("http", corev1.ProtocolTCP, 8081), slicePort("admin", corev1.ProtocolTCP, 9090)}, ready(p2, n.name))
	ip := svc.Spec.ClusterIP
	a.waitFrontend(fmtAddr(ip, 80, "TCP"), 10*time.Second, p1.ip+":8080", p2.ip+":8081")
	a.waitFrontend(fmtAddr(ip, 90, "TCP"), 10*time.Second, p1.ip+":9090", p2.ip+":9090")
	for _, from := range n.insideClients() {
		for _, port := range []int{80, 90} {
			line, peer := fmt.Sprintf("tcp %s:%d 40", ip, port), fmt.Sprintf("%s:%d", ip, port)
			wantAnswers(t, line+" from "+from.String(), answers(t, from, line, peer), "web-1", "web-2")
		}
	}
}

// A dual-stack Service is reached over IPv4 and IPv6, inside the node
// and from outside through its NodePort, each family at its own
// endpoints.
func TestDualStackServiceIsReachedOverBothFamilies(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	n := newNode(t, "node-a")
	c.createNode(n.name, nil)
	a := n.startAgent(c)
	p1, p2 := n.newPod("web-1", 8080), n.newPod("web-2", 8080)
	policy := corev1.IPFamilyPolicyRequireDualStack
	svc := c.createService("web", corev1.ServiceSpec{
		Type: corev1.ServiceTypeNodePort, Ports: webPorts, Selector: map[string]string{"app": "web"},
		IPFamilyPolicy: &policy, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
	})
	if len(svc.Spec.ClusterIPs) != 2 {
		t.Fatalf("the API server gave the dual-stack Service %v", svc.Spec.ClusterIPs)
	}
	c.setSliceFamily("web", "web-v4", discoveryv1.AddressTypeIPv4, webSlicePorts, ready(p1, n.name), ready(p2, n.name))
	c.setSliceFamily("web", "web-v6", discoveryv1.AddressTypeIPv6, webSlicePorts, ready(p1, n.name), ready(p2, n.name))
	v4, v6 := svc.Spec.ClusterIPs[0], svc.Spec.ClusterIPs[1]
	a.waitFrontend(fmtAddr(v4, 80, "TCP"), 10*time.Second, p1.ip+":8080", p2.ip+":8080")
	a.waitFrontend(fmtAddr(v6, 80, "TCP"), 10*time.Second, "["+p1.ipv6+"]:8080", "["+p2.ipv6+"]:8080")
	for _, from := range n.insideClients() {
		for _, to := range []string{v4 + ":80", "[" + v6 + "]:80"} {
			wantAnswers(t, to+" from "+from.String(), answers(t, from, "tcp "+to+" 40", to), "web-1", "web-2")
			udp := to[:len(to)-2] + "53"
			wantAnswers(t, udp+"/UDP from "+from.String(), answers(t, from, "udp "+udp+" 40", udp), "web-1", "web-2")
		}
	}
	nodePort := svc.Spec.Ports[0].NodePort
	for _, to := range []string{fmt.Sprintf("%s:%d", nodeIP, nodePort), fmt.Sprintf("[%s]:%d", nodeIPv6, nodePort)} {
		wantAnswers(t, to+" from outside", answers(t, client{n, viaExternal}, "tcp "+to+" 40", to), "web-1", "web-2")
	}
}
