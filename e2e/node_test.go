package e2e

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lbstate/lbstate/bpf/bpftest"
)

// A node is made of network namespaces the test creates, never the
// host's: the node's own namespace, where the agent attaches the
// datapath; pods, each a namespace joined to the node by a veth pair;
// a client pod, whose traffic the tc programs balance on its veth's node
// end (internal scope); an external host, over a veth to the node
// (NodePort and LoadBalancer traffic, external scope); and a cgroup2
// child of the test's own, whose processes in the node's namespace go
// through socket load balancing.
type node struct {
	t        testing.TB
	name     string
	ns       *bpftest.Netns
	external *bpftest.Netns
	client   *bpftest.Netns
	cg       string
	pods     int // pods made so far (their addresses and interfaces)
	udpPorts int // the next UDP source port of answers (takeUDPPorts)
	// agent is the agent last started for the node; diagnosed says that
	// a failure's state was written (diagnose_test.go).
	agent     *agent
	diagnosed bool
}

// Addresses of the node, all inside the test's namespaces.
const (
	nodeIP       = "198.51.100.1" // the node's address towards the external host
	nodeIPv6     = "2001:db8:100::1"
	externalIP   = "198.51.100.2"
	externalIPv6 = "2001:db8:100::2"
	lbRange      = "203.0.113.0/24" // LoadBalancer ingress IPs, routed to the node
	lbRangeV6    = "2001:db8:203::/64"
	podGateway   = "169.254.1.1" // every pod's gateway: the node end of its veth
	podGatewayV6 = "fe80::1"
	clientPodIP  = "10.244.255.1"
	clientPodV6  = "fd00:10:244:ff::1"

	externalDev = "lbext0" // on the node: traffic from outside
	clientDev   = "lbcli0" // on the node: the client pod's veth
)

// newNode makes the node's namespaces, the client pod and the external
// host; they go away when the test ends.
func newNode(t testing.TB, name string) *node {
	t.Helper()
	n := &node{t: t, name: name, ns: bpftest.NewNetns(t), external: bpftest.NewNetns(t), client: bpftest.NewNetns(t), cg: bpftest.Cgroup(t)}
	check(t, n.ns.Do(func() error {
		for _, f := range []string{"/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv6/conf/all/forwarding"} {
			if err := os.WriteFile(f, []byte("1"), 0o644); err != nil {
				return err
			}
		}
		return nil
	}))
	bpftest.Link(t, n.ns, externalDev, nodeIP+"/24", n.external, "eth0", externalIP+"/24")
	check(t, n.ns.Do(func() error { return addAddr(externalDev, nodeIPv6+"/64") }))
	check(t, n.external.Do(func() error {
		if err := addAddr("eth0", externalIPv6+"/64"); err != nil {
			return err
		}
		for _, dst := range []string{lbRange, lbRangeV6} {
			via := nodeIP
			if strings.Contains(dst, ":") {
				via = nodeIPv6
			}
			if err := addRoute(dst, via, ""); err != nil {
				return err
			}
		}
		return nil
	}))
	n.joinPod(n.client, clientDev, clientPodIP, clientPodV6)
	return n
}

// pod is a network namespace joined to the node, with an IPv4 and an
// IPv6 address.
type pod struct {
	name     string
	ns       *bpftest.Netns
	ip, ipv6 string
}

// newPod makes a pod serving its name on TCP and UDP ports (on both of
// its addresses).
func (n *node) newPod(name string, ports ...int) *pod {
	n.t.Helper()
	n.pods++
	p := &pod{
		name: name, ns: bpftest.NewNetns(n.t),
		ip:   fmt.Sprintf("10.244.%d.%d", n.pods/250, n.pods%250+1),
		ipv6: fmt.Sprintf("fd00:10:244::%x", n.pods),
	}
	n.joinPod(p.ns, fmt.Sprintf("lbp%d", n.pods), p.ip, p.ipv6)
	for _, port := range ports {
		bpftest.ServeName(n.t, p.ns, p.ip, port, name)
		bpftest.ServeName(n.t, p.ns, p.ipv6, port, name)
	}
	n.diagnoseOnFailure() // while the pod is there
	return p
}

// joinPod links a pod's namespace to the node: eth0 in the pod with its
// addresses and a default route through the node, dev on the node with
// a route to each address.
func (n *node) joinPod(ns *bpftest.Netns, dev, ip, ipv6 string) {
	n.t.Helper()
	bpftest.Link(n.t, n.ns, dev, podGateway+"/32", ns, "eth0", ip+"/32")
	check(n.t, ns.Do(func() error {
		if err := addAddr("eth0", ipv6+"/128"); err != nil {
			return err
		}
		if err := addRoute("0.0.0.0/0", podGateway, "eth0"); err != nil {
			return err
		}
		return addRoute("::/0", podGatewayV6, "eth0")
	}))
	check(n.t, n.ns.Do(func() error {
		if err := addAddr(dev, podGatewayV6+"/64"); err != nil {
			return err
		}
		if err := addRoute(ip+"/32", "", dev); err != nil {
			return err
		}
		return addRoute(ipv6+"/128", "", dev)
	}))
}

// addAddr adds cidr to the calling thread's interface dev (no duplicate
// address detection: the address is usable at once).
func addAddr(dev, cidr string) error {
	l, err := netlink.LinkByName(dev)
	if err != nil {
		return err
	}
	a, err := netlink.ParseAddr(cidr)
	if err != nil {
		return err
	}
	a.Flags = unix.IFA_F_NODAD
	if err := netlink.AddrAdd(l, a); err != nil {
		return fmt.Errorf("%s on %s: %w", cidr, dev, err)
	}
	return nil
}

// addRoute routes dst via gateway via (if set) out of dev (if set; with
// via, the gateway is on-link).
func addRoute(dst, via, dev string) error {
	_, prefix, err := net.ParseCIDR(dst)
	if err != nil {
		return err
	}
	r := &netlink.Route{Dst: prefix}
	if via != "" {
		r.Gw = net.ParseIP(via)
	}
	if dev != "" {
		l, err := netlink.LinkByName(dev)
		if err != nil {
			return err
		}
		r.LinkIndex = l.Attrs().Index
		if via != "" {
			r.Flags = int(netlink.FLAG_ONLINK)
		}
	}
	if err := netlink.RouteAdd(r); err != nil {
		return fmt.Errorf("route %s via %q dev %q: %w", dst, via, dev, err)
	}
	return nil
}

func check(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
