package e2e

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// A client reuses a port for a connection to another destination as
// soon as its last connection from it closed (its TIME_WAIT holds the
// port only towards that destination): from the external host, each of
// ten ports connects to the NodePort, closes, and connects to the
// LoadBalancer IP of the same Service, whose one backend (external
// traffic policy Local) sees both connections as the same address
// pair. Each second connection is answered, by its frontend. Once the
// datapath dropped their SYNs as reply collisions with the closing first
// flows (ct-collision) until they timed out; the ports of
// TestNodePortAndLoadBalancerFollowTheTrafficPolicies's 60 connections
// met so now and then, and it flaked.
func TestAClientPortReusedForAnotherFrontendOfItsBackendConnects(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	n := newNode(t, "node-a")
	c.createNode(n.name, nil)
	a := n.startAgent(c)
	local, remote := n.newPod("local", 8080), n.newPod("remote", 8080)
	const lbIP = "203.0.113.10"
	svc := c.createService("web", corev1.ServiceSpec{
		Type: corev1.ServiceTypeLoadBalancer, Ports: webPorts, Selector: map[string]string{"app": "web"},
		ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
	})
	c.setIngress("web", lbIP)
	c.setSlice("web", "web-1", webSlicePorts, ready(local, n.name), ready(remote, "node-b"))
	nodePort := fmt.Sprintf("%s:%d", nodeIP, svc.Spec.Ports[0].NodePort)
	a.waitFrontend(fmtAddr(lbIP, 80, "TCP"), 10*time.Second, local.ip+":8080")
	a.waitFrontend(nodePort+"/TCP", 10*time.Second, local.ip+":8080")

	check(t, n.external.Do(func() error {
		for port := 40000; port < 40010; port++ {
			for _, to := range []string{nodePort, lbIP + ":80"} {
				name, peer, err := dialFrom(port, to)
				switch {
				case err != nil:
					t.Errorf("from port %d to %s: %v", port, to, err)
				case name != "local" || peer != to:
					t.Errorf("from port %d to %s: answered by %q from %s, want local from %s", port, to, name, peer, to)
				}
			}
		}
		return nil
	}))
}

// dialFrom connects from port of the calling thread's namespace to to,
// and returns the name the server sends and whom the socket talked to.
// SO_REUSEADDR lets it bind the port while its last connection is in
// TIME_WAIT, as the kernel's own choice of a port would.
func dialFrom(port int, to string) (name, peer string, err error) {
	d := net.Dialer{
		Timeout:   3 * time.Second,
		LocalAddr: &net.TCPAddr{Port: port},
		Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1) })
			if err != nil {
				return err
			}
			return serr
		},
	}
	conn, err := d.Dial("tcp", to)
	if err != nil {
		return "", "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	name, err = bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(name), conn.RemoteAddr().String(), err
}
