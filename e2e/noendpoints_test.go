package e2e

import (
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// A Service without endpoints, as documented: a process's connect() is
// refused at once (socket LB); a pod's packets are dropped (tc); both
// are counted as no-backend drops of the frontend.
func TestServiceWithoutEndpointsRefusesOrDropsAndCounts(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	n := newNode(t, "node-a")
	a := n.startAgent(c)
	svc := c.createService("empty", corev1.ServiceSpec{Ports: webPorts, Selector: map[string]string{"app": "none"}})
	ip := svc.Spec.ClusterIP
	fe := fmtAddr(ip, 80, "TCP")
	a.waitFrontend(fe, 10*time.Second)

	got := answers(t, client{n, viaCgroup}, fmt.Sprintf("tcp %s:80 5", ip), ip+":80")
	if got["refused"] != 5 || len(got) != 1 {
		t.Fatalf("connect() from the node's cgroup to a Service without endpoints: %v, want 5 refused", got)
	}
	for range 3 {
		var err error
		check(t, n.client.Do(func() error {
			var c net.Conn
			c, err = net.DialTimeout("tcp", ip+":80", 500*time.Millisecond)
			if err == nil {
				c.Close()
			}
			return nil
		}))
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("a connection from the client pod to a Service without endpoints: %v, want it dropped (a timeout)", err)
		}
	}
	eventually(t, 5*time.Second, func() error {
		if got := a.metric("lbstate_frontend_drops_total", "frontend", fe, "reason", "no-backend"); got < 8 {
			return fmt.Errorf("lbstate_frontend_drops_total{frontend=%q,reason=no-backend} = %v, want at least 8 (5 connects, 3 SYNs or more)", fe, got)
		}
		return nil
	})
}
