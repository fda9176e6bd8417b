package redirectpolicy

import (
	"maps"
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
	// Ready is the pod's latest Ready condition.
	Ready bool
	// Terminating is set once the pod is being deleted.
	Terminating bool
	// Finished is set once the pod has succeeded or failed: it serves
	// nothing any more.
	Finished bool
	Ports    []ContainerPort
}

// State is the backend state of the pod's addresses, as the EndpointSlice
// controller would publish them: active when ready and not terminating;
// terminating while it still reports ready (it takes new flows only when
// no pod is active); otherwise not-ready, taking no new flows but kept, so
// that its connections and its backend ID survive a failed readiness
// probe. serves is false for a finished pod, which is no backend at all.
func (p *Pod) State() (state lb.BackendState, serves bool) {
	switch {
	case p.Finished:
		return 0, false
	case p.Ready && !p.Terminating:
		return lb.BackendActive, true
	case p.Ready:
		return lb.BackendTerminating, true
	}
	return lb.BackendNotReady, true
}

// Equal reports whether two pods are the same to a policy.
func (p *Pod) Equal(o *Pod) bool {
	return p.Namespace == o.Namespace && p.Name == o.Name && maps.Equal(p.Labels, o.Labels) && slices.Equal(p.IPs, o.IPs) &&
		p.Ready == o.Ready && p.Terminating == o.Terminating && p.Finished == o.Finished && slices.Equal(p.Ports, o.Ports)
}

// PodRef is a pod a policy selects, as its status shows it.
type PodRef struct {
	Name  string          `json:"name" yaml:"name"`
	IPs   []netip.Addr    `json:"ips,omitempty" yaml:"ips,omitempty"`
	State lb.BackendState `json:"state" yaml:"state"`
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
	out.Terminating = p.DeletionTimestamp != nil
	out.Finished = p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			out.Ready = c.Status == corev1.ConditionTrue
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
