package e2e

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/lbstate/lbstate/bpf/bpftest"
)

// servicePort is a Service port: name, protocol, port, targetPort.
func servicePort(name string, proto corev1.Protocol, port int32, target intstr.IntOrString) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: proto, Port: port, TargetPort: target}
}

// webPorts are the ports most scenarios use: http 80/TCP and dns 53/UDP,
// both to the pods' 8080.
var webPorts = []corev1.ServicePort{
	servicePort("http", corev1.ProtocolTCP, 80, intstr.FromInt32(8080)),
	servicePort("dns", corev1.ProtocolUDP, 53, intstr.FromInt32(8080)),
}

// createService creates a Service in the test's namespace and returns
// it as the API server defaulted it (its ClusterIP allocated).
func (c *cluster) createService(name string, spec corev1.ServiceSpec) *corev1.Service {
	c.t.Helper()
	if spec.Type == "" {
		spec.Type = corev1.ServiceTypeClusterIP
	}
	svc, err := c.kube.CoreV1().Services(c.ns).Create(c.ctx(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.ns},
		Spec:       spec,
	}, metav1.CreateOptions{})
	check(c.t, err)
	return svc
}

// updateService changes a Service with change, retrying on conflicts.
func (c *cluster) updateService(name string, change func(*corev1.Service)) *corev1.Service {
	c.t.Helper()
	var out *corev1.Service
	eventually(c.t, 10*time.Second, func() error {
		svc, err := c.kube.CoreV1().Services(c.ns).Get(c.ctx(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(svc)
		out, err = c.kube.CoreV1().Services(c.ns).Update(c.ctx(), svc, metav1.UpdateOptions{})
		return err
	})
	return out
}

// endpoint is one endpoint of a slice, as the EndpointSlice controller
// would write it for a pod.
type endpoint struct {
	pod                   *pod
	notReady, terminating bool
	notServing            bool
	node, zone            string
	hintZones, hintNodes  []string
	v6                    bool
}

// ready is an endpoint of p that is ready (and serving) on node.
func ready(p *pod, node string) endpoint { return endpoint{pod: p, node: node} }

// setSlice creates or replaces the EndpointSlice named slice of Service
// svc with eps, on ports (name and port; protocol as the Service's).
func (c *cluster) setSlice(svc, slice string, ports []discoveryv1.EndpointPort, eps ...endpoint) {
	c.t.Helper()
	c.setSliceFamily(svc, slice, discoveryv1.AddressTypeIPv4, ports, eps...)
}

func (c *cluster) setSliceFamily(svc, slice string, family discoveryv1.AddressType, ports []discoveryv1.EndpointPort, eps ...endpoint) {
	c.t.Helper()
	obj := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: slice, Namespace: c.ns,
			Labels: map[string]string{discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: "e2e.lbstate.io"},
		},
		AddressType: family,
		Ports:       ports,
	}
	for _, e := range eps {
		addr := e.pod.ip
		if family == discoveryv1.AddressTypeIPv6 {
			addr = e.pod.ipv6
		}
		ep := discoveryv1.Endpoint{
			Addresses: []string{addr},
			Conditions: discoveryv1.EndpointConditions{
				Ready:       new(!e.notReady && !e.terminating),
				Serving:     new(!e.notServing),
				Terminating: new(e.terminating),
			},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: c.ns, Name: e.pod.name},
		}
		if e.node != "" {
			ep.NodeName = new(e.node)
		}
		if e.zone != "" {
			ep.Zone = new(e.zone)
		}
		if len(e.hintZones)+len(e.hintNodes) > 0 {
			ep.Hints = &discoveryv1.EndpointHints{}
			for _, z := range e.hintZones {
				ep.Hints.ForZones = append(ep.Hints.ForZones, discoveryv1.ForZone{Name: z})
			}
			for _, n := range e.hintNodes {
				ep.Hints.ForNodes = append(ep.Hints.ForNodes, discoveryv1.ForNode{Name: n})
			}
		}
		obj.Endpoints = append(obj.Endpoints, ep)
	}
	slices := c.kube.DiscoveryV1().EndpointSlices(c.ns)
	eventually(c.t, 10*time.Second, func() error {
		old, err := slices.Get(c.ctx(), slice, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = slices.Create(c.ctx(), obj, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		obj.ResourceVersion = old.ResourceVersion
		_, err = slices.Update(c.ctx(), obj, metav1.UpdateOptions{})
		return err
	})
}

// slicePort is an EndpointSlice port.
func slicePort(name string, proto corev1.Protocol, port int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: new(name), Protocol: new(proto), Port: new(port)}
}

// webSlicePorts are webPorts' ports on the pods.
var webSlicePorts = []discoveryv1.EndpointPort{
	slicePort("http", corev1.ProtocolTCP, 8080),
	slicePort("dns", corev1.ProtocolUDP, 8080),
}

// answers runs the client script line from the client pod (tc), from
// the node's test cgroup (socket LB) or from the external host, checks
// that every exchange saw peer as its peer, and counts who answered.
//
// A UDP line's sockets get source ports that no earlier line on the node
// used, so that each datagram starts a new flow: one from a port an
// earlier line's socket had, within the UDP conntrack timeout, would
// continue that flow and keep its backend while the backend is in the
// maps (docs/datapath.md), whatever changed since.
func answers(t testing.TB, from client, line, peer string) map[string]int {
	t.Helper()
	script := []string{line}
	if strings.HasPrefix(line, "udp") {
		script = []string{"ports " + strconv.Itoa(from.n.takeUDPPorts(line)), line}
	}
	var lines []string
	switch from.kind {
	case viaCgroup:
		lines = bpftest.RunClient(t, from.n.cg, from.n.ns, script...)
	case viaClientPod:
		lines = bpftest.RunClient(t, "", from.n.client, script...)
	case viaExternal:
		lines = bpftest.RunClient(t, "", from.n.external, script...)
	}
	counts := map[string]int{}
	for _, l := range lines {
		name, got, _ := strings.Cut(l, " ")
		if name == "refused" {
			counts["refused"]++
			continue
		}
		if got != peer {
			t.Fatalf("%s from %s: the client saw %q, not the frontend %s", line, from, l, peer)
		}
		counts[name]++
	}
	return counts
}

// UDP source ports answers hands out, below the ephemeral range.
const firstUDPPort, lastUDPPort = 20000, 29999

// takeUDPPorts returns the first of as many source ports as the UDP
// client line (its last field the count of sockets) needs, none handed
// out before on n.
func (n *node) takeUDPPorts(line string) int {
	n.t.Helper()
	fields := strings.Fields(line)
	count, err := strconv.Atoi(fields[len(fields)-1])
	if err != nil {
		n.t.Fatalf("client line %q: its last field is not a count", line)
	}
	first := max(n.udpPorts, firstUDPPort)
	if first+count-1 > lastUDPPort {
		n.t.Fatalf("node %s: no more UDP source ports for %q", n.name, line)
	}
	n.udpPorts = first + count
	return first
}

// client is where a scenario's connections come from.
type client struct {
	n    *node
	kind int
}

const (
	viaClientPod = iota // a pod: tc on its veth
	viaCgroup           // a process of the node: socket LB
	viaExternal         // outside the node: tc on the node's device
)

func (c client) String() string {
	return [...]string{"the client pod (tc)", "the node's cgroup (socket LB)", "the external host (tc)"}[c.kind]
}

// insideClients are the node's two in-cluster clients.
func (n *node) insideClients() []client {
	return []client{{n, viaClientPod}, {n, viaCgroup}}
}

// wantAnswers checks that exactly the pods named in want answered (each
// at least once), and nobody else.
func wantAnswers(t testing.TB, what string, got map[string]int, want ...string) {
	t.Helper()
	names := slices.Sorted(maps.Keys(got))
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("%s: answered by %v, want each of %v and no other", what, got, want)
	}
}

func fmtAddr(ip string, port int32, proto string) string {
	if strings.Contains(ip, ":") {
		return fmt.Sprintf("[%s]:%d/%s", ip, port, proto)
	}
	return fmt.Sprintf("%s:%d/%s", ip, port, proto)
}

func intOrPort(p int32) intstr.IntOrString { return intstr.FromInt32(p) }

// sliceDNSPorts are the DNS Service's ports on its pods.
var sliceDNSPorts = []discoveryv1.EndpointPort{
	slicePort("dns", corev1.ProtocolUDP, 8053),
	slicePort("dns-tcp", corev1.ProtocolTCP, 8053),
}
