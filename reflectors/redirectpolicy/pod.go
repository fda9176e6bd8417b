package redirectpolicy

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/lbstate/lbstate/lb"
)

// Pod is what a policy reads of a pod on this node.
type Pod struct {
	Namespace, Name string
	Labels          map[string]string
	IPs             []netip.Addr
	// Ready is the pod's latest Ready condition, false for a pod that
	// is terminating or has finished.
	Ready bool
	Ports []ContainerPort
}

// ContainerPort is one port a container declares.
type ContainerPort struct {
	Name     string
	Port     uint16
	Protocol lb.Protocol
}

// PodOf reads a Kubernetes pod. IPs that do not parse and ports out of
// range are left out: they cannot be redirected to.
func PodOf(p *corev1.Pod) Pod {
	out := Pod{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels}
	for _, ip := range p.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil && !slices.Contains(out.IPs, a.Unmap()) {
			out.IPs = append(out.IPs, a.Unmap())
		}
	}
	live := p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			out.Ready = live && c.Status == corev1.ConditionTrue
		}
	}
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			proto, err := lb.ParseProtocol(string(cp.Protocol))
			if cp.Protocol == "" {
				proto, err = lb.ProtoTCP, nil
			}
			if err != nil || cp.ContainerPort <= 0 || cp.ContainerPort > 65535 {
				continue
			}
			out.Ports = append(out.Ports, ContainerPort{Name: cp.Name, Port: uint16(cp.ContainerPort), Protocol: proto})
		}
	}
	return out
}

// namedPort returns the pod's container port of that name and protocol.
func (p *Pod) namedPort(name string, proto lb.Protocol) (uint16, bool) {
	for _, cp := range p.Ports {
		if cp.Name == name && cp.Protocol == proto {
			return cp.Port, true
		}
	}
	return 0, false
}
