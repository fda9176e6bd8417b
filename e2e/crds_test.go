package e2e

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CRDs installed after the agent started: a route and a local redirect
// policy created then are applied within 5 s, without a restart; and
// the source synced without waiting for them.
func TestRoutesAndPoliciesOfCRDsInstalledAfterStartApply(t *testing.T) {
	c := newCluster(t, clusterOptions{noCRDs: true})
	n := newNode(t, "node-a")
	a := n.startAgent(c)
	apex, v1, local := n.newPod("apex", 8080), n.newPod("v1", 8080), n.newPod("node-local", 8080)
	var ip string
	for name, p := range map[string]*pod{"web": apex, "web-v1": v1} {
		svc := c.createService(name, corev1.ServiceSpec{Ports: webPorts[:1], Selector: map[string]string{"app": name}})
		c.setSlice(name, name+"-1", webSlicePorts[:1], ready(p, "node-b"))
		if name == "web" {
			ip = svc.Spec.ClusterIP
		}
	}
	dns := c.createService("dns", corev1.ServiceSpec{Ports: webPorts[1:], Selector: map[string]string{"app": "dns"}})
	c.setSlice("dns", "dns-1", webSlicePorts[1:], ready(apex, "node-b"))
	c.createPod(local, n.name, map[string]string{"app": "node-local"}, corev1.ContainerPort{Name: "dns", ContainerPort: 8080, Protocol: corev1.ProtocolUDP})
	a.waitFrontend(fmtAddr(ip, 80, "TCP"), 10*time.Second, apex.ip+":8080")
	a.waitFrontend(fmtAddr(dns.Spec.ClusterIP, 53, "UDP"), 10*time.Second, apex.ip+":8080")
	eventually(t, 10*time.Second, func() error {
		if got := a.metric("lbstate_source_synced", "source", "k8s"); got != 1 {
			return fmt.Errorf("lbstate_source_synced{source=k8s} = %v without the CRDs", got)
		}
		return nil
	})

	c.applyCRDs()
	start := time.Now()
	c.applyRoute(httpRoute(c.ns, "web-split", "web", map[string]int64{"web-v1": 1}))
	a.waitFrontend(fmtAddr(ip, 80, "TCP"), 5*time.Second, v1.ip+":8080")
	t.Logf("a route created after its CRD was installed: in the maps %s after its create's call", time.Since(start))
	start = time.Now()
	_, err := c.dyn.Resource(redirectPolicies).Namespace(c.ns).Create(c.ctx(), redirectPolicy(c.ns, "dns", "node-local", redirectPort{"dns", "8080", "UDP"}), metav1.CreateOptions{})
	check(t, err)
	a.waitFrontend(fmtAddr(dns.Spec.ClusterIP, 53, "UDP"), 5*time.Second, local.ip+":8080")
	t.Logf("a policy created after its CRD was installed: in the maps %s after its create's call", time.Since(start))
	wantAnswers(t, "the route", answers(t, client{n, viaClientPod}, fmt.Sprintf("tcp %s:80 20", ip), ip+":80"), "v1")
	wantAnswers(t, "the policy", answers(t, client{n, viaClientPod}, fmt.Sprintf("udp %s:53 20", dns.Spec.ClusterIP), dns.Spec.ClusterIP+":53"), "node-local")
}
