package k8s

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"

	"github.com/lbstate/lbstate/lb"
)

// HostPortServiceName names the service that holds a pod's host ports.
func HostPortServiceName(pod *corev1.Pod) lb.ServiceName {
	return lb.NewServiceName(pod.Namespace, pod.Name+hostPortSuffix)
}

const hostPortSuffix = ":hostports"

// ConvertPod returns the HostPort service of a pod on the local node: a
// frontend per host port on the node's addresses and the node-wide
// any-address (or only on the port's hostIP), and the pod's IPs with the
// container port as backends. ok is false for a pod with no host port,
// not on this node, or without an IP yet.
func ConvertPod(pod *corev1.Pod, node lb.Node) (params lb.ServiceParams, backends []lb.BackendParams, ok bool, err error) {
	name := HostPortServiceName(pod)
	if pod.Spec.NodeName != node.Name || pod.Spec.HostNetwork || len(pod.Status.PodIPs) == 0 ||
		pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || pod.DeletionTimestamp != nil {
		return params, nil, false, nil
	}
	var podIPs []netip.Addr
	for i, ip := range pod.Status.PodIPs {
		a, err := netip.ParseAddr(ip.IP)
		if err != nil {
			return params, nil, false, fmt.Errorf("pod %s/%s: status.podIPs[%d]: %w", pod.Namespace, pod.Name, i, err)
		}
		podIPs = append(podIPs, a.Unmap())
	}
	params = lb.ServiceParams{Name: name, Source: lb.SourceK8s, Created: pod.CreationTimestamp.Time}
	seen := map[lb.L3n4Addr]bool{}
	for ci, c := range pod.Spec.Containers {
		for pi, port := range c.Ports {
			if port.HostPort == 0 {
				continue
			}
			field := fmt.Sprintf("spec.containers[%d].ports[%d]", ci, pi)
			proto := lb.ProtoTCP
			if port.Protocol != "" {
				if proto, err = lb.ParseProtocol(string(port.Protocol)); err != nil {
					return params, nil, false, fmt.Errorf("pod %s/%s: %s.protocol: %w", pod.Namespace, pod.Name, field, err)
				}
			}
			if port.HostPort < 0 || port.HostPort > 65535 || port.ContainerPort <= 0 || port.ContainerPort > 65535 {
				return params, nil, false, fmt.Errorf("pod %s/%s: %s: ports %d/%d out of range", pod.Namespace, pod.Name, field, port.HostPort, port.ContainerPort)
			}
			portName := fmt.Sprintf("hostport-%d-%s", port.HostPort, proto)
			// A host port is on the node's addresses only because the node
			// has them: an address named for a Service owns them first. A
			// hostIP is named for the pod.
			var addrs []netip.Addr
			claim := lb.ClaimNodeAddress
			if port.HostIP != "" {
				a, err := netip.ParseAddr(port.HostIP)
				if err != nil {
					return params, nil, false, fmt.Errorf("pod %s/%s: %s.hostIP: %w", pod.Namespace, pod.Name, field, err)
				}
				addrs, claim = []netip.Addr{a.Unmap()}, lb.ClaimExplicit
			} else {
				for _, ip := range podIPs {
					if ip.Is4() {
						addrs = append(addrs, netip.IPv4Unspecified())
					} else {
						addrs = append(addrs, netip.IPv6Unspecified())
					}
				}
				addrs = append(addrs, node.Addresses...)
			}
			for _, a := range addrs {
				fa := lb.NewL3n4Addr(proto, a, uint16(port.HostPort), lb.ScopeExternal)
				if !seen[fa] {
					seen[fa] = true
					params.Frontends = append(params.Frontends, lb.FrontendParams{Address: fa, Type: lb.SVCTypeHostPort, PortName: portName, Claim: claim})
				}
			}
			for _, ip := range podIPs {
				backends = append(backends, lb.BackendParams{
					Address:  lb.NewL3n4Addr(proto, ip, uint16(port.ContainerPort), lb.ScopeExternal),
					Weight:   lb.DefaultBackendWeight,
					NodeName: node.Name,
				}.WithPortNames(portName))
			}
		}
	}
	if len(params.Frontends) == 0 {
		return lb.ServiceParams{}, nil, false, nil
	}
	if err := params.Validate(); err != nil {
		return lb.ServiceParams{}, nil, false, err
	}
	return params, backends, true, nil
}
