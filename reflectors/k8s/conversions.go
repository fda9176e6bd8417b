// Package k8s is the Kubernetes services source: it turns Services,
// EndpointSlices, Nodes and Pods (host ports) into lbstate's model, the
// way kube-proxy and Cilium interpret them. The conversions here are pure
// (objects in, lb values out); Cell runs a Reflector per feed
// (kubeapi.Feed: the API server, a directory of manifests), declaring as
// the feed's identity (k8s, file).
package k8s

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/lbstate/lbstate/lb"
)

// Annotations lbstate reads.
const (
	// AnnotationAlgorithm on a Service chooses its algorithm: random or
	// maglev.
	AnnotationAlgorithm = "lbstate.io/algorithm"
	// AnnotationWeight on an EndpointSlice gives all its endpoints a
	// weight (0-65535; 0 drains them).
	AnnotationWeight = "lbstate.io/weight"
	// AnnotationWeights on an EndpointSlice gives single addresses a
	// weight, overriding AnnotationWeight: "10.0.0.1=90,10.0.0.2=10".
	AnnotationWeights = "lbstate.io/weights"

	// AnnotationTopologyMode is Kubernetes' topology-aware routing switch;
	// AnnotationTopologyAwareHints is its deprecated predecessor.
	AnnotationTopologyMode       = "service.kubernetes.io/topology-mode"
	AnnotationTopologyAwareHints = "service.kubernetes.io/topology-aware-hints"
	// LabelServiceName names an EndpointSlice's service.
	LabelServiceName = discoveryv1.LabelServiceName
	// LabelTopologyZone is a node's zone.
	LabelTopologyZone = corev1.LabelTopologyZone
)

// ServiceOptions is what service conversion needs besides the Service.
type ServiceOptions struct {
	// Node is the local node; its addresses get NodePort frontends.
	Node lb.Node
	// LoadBalancerClasses, when set, limits the LoadBalancer ingress IPs
	// served to Services of these classes (and those without a class).
	// Empty serves every class, as kube-proxy does: the class says which
	// controller assigns the IPs, not who forwards traffic for them.
	LoadBalancerClasses []string
	// Source is the source the declarations are made as (default k8s).
	Source lb.Source
	// NodePortRange is the cluster's node-port range (zero:
	// DefaultNodePortRange). A NodePort inside it claims the node's
	// addresses before LoadBalancer and external IPs (lb.Claim).
	NodePortRange PortRange
}

// ConvertService returns the declaration of a Service. ok is false for
// Services lbstate does not balance (ExternalName, headless), except a
// headless one that is global and shared (lb.ServiceParams.IsShared):
// that one is declared without frontends, for the clustermesh exporter.
//
// unknown lists the values of evolving fields (spec.type, the traffic
// policies, trafficDistribution, sessionAffinity, ingress ipMode, port
// protocols, lbstate's and Kubernetes' annotations) that this version
// does not know; each was replaced by its field's default, and params is
// complete without them: they are for the caller to log, or to reject
// where it validates its input strictly (see UnknownValue).
//
// An error names the Service and the field that is wrong, and means
// nothing of the Service should be declared.
func ConvertService(svc *corev1.Service, opts ServiceOptions) (params lb.ServiceParams, ok bool, unknown []UnknownValue, err error) {
	return convertService(svc, opts, lb.NewServiceName(svc.Namespace, svc.Name))
}

// convertService is ConvertService of a Service whose name the caller
// has made already (the reflector keeps one per service).
func convertService(svc *corev1.Service, opts ServiceOptions, name lb.ServiceName) (params lb.ServiceParams, ok bool, unknown []UnknownValue, err error) {
	fail := func(field string, err error) (lb.ServiceParams, bool, []UnknownValue, error) {
		return lb.ServiceParams{}, false, nil, fmt.Errorf("service %s: %s: %w", name, field, err)
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return lb.ServiceParams{}, false, nil, nil
	}
	src := opts.Source
	if src == 0 {
		src = lb.SourceK8s
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		// Nothing to balance; but a headless global service shared with
		// other clusters is declared without frontends, so that the
		// clustermesh exporter publishes its backends as Cilium does.
		p := lb.ServiceParams{Name: name, Source: src, Created: svc.CreationTimestamp.Time, Annotations: carriedAnnotations(svc)}
		return p, p.IsShared(), nil, nil
	}
	u := &unknownValues{service: name}
	params = lb.ServiceParams{
		Name:                name,
		Source:              src,
		ExtTrafficPolicy:    trafficPolicy(u, "spec.externalTrafficPolicy", string(svc.Spec.ExternalTrafficPolicy)),
		TrafficDistribution: distribution(u, svc),
		Algorithm:           algorithm(u, svc),
		HealthCheckNodePort: uint16(svc.Spec.HealthCheckNodePort),
		Created:             svc.CreationTimestamp.Time,
		Annotations:         carriedAnnotations(svc),
	}
	clusterAffinity(u, params.Annotations)
	if p := svc.Spec.InternalTrafficPolicy; p != nil {
		params.IntTrafficPolicy = trafficPolicy(u, "spec.internalTrafficPolicy", string(*p))
	}
	if svc.Spec.HealthCheckNodePort < 0 || svc.Spec.HealthCheckNodePort > 65535 {
		return fail("spec.healthCheckNodePort", fmt.Errorf("%d is not a port", svc.Spec.HealthCheckNodePort))
	}
	affinity := u.oneOf("spec.sessionAffinity", string(svc.Spec.SessionAffinity), "None",
		"", string(corev1.ServiceAffinityNone), string(corev1.ServiceAffinityClientIP))
	if affinity == string(corev1.ServiceAffinityClientIP) {
		params.SessionAffinity = true
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			t := *c.ClientIP.TimeoutSeconds
			if t <= 0 || t > 86400 {
				return fail("spec.sessionAffinityConfig.clientIP.timeoutSeconds", fmt.Errorf("%d is not in 1-86400", t))
			}
			params.SessionAffinityTimeout = uint32(t)
		}
	}
	for i, r := range svc.Spec.LoadBalancerSourceRanges {
		prefix, err := netip.ParsePrefix(strings.TrimSpace(r))
		if err != nil {
			return fail(fmt.Sprintf("spec.loadBalancerSourceRanges[%d]", i), err)
		}
		params.SourceRanges = append(params.SourceRanges, prefix.Masked())
	}
	fes, ferr := frontends(svc, params, opts, u)
	if ferr != nil {
		return fail(ferr.field, ferr.err)
	}
	params.Frontends = fes
	if err := params.Validate(); err != nil {
		return lb.ServiceParams{}, false, nil, err
	}
	return params, true, u.list, nil
}

// trafficPolicy reads an external or internal traffic policy: Local, or
// Cluster, the default.
func trafficPolicy(u *unknownValues, field, p string) lb.TrafficPolicy {
	if u.oneOf(field, p, "Cluster", "", "Cluster", "Local") == "Local" {
		return lb.TrafficPolicyLocal
	}
	return lb.TrafficPolicyCluster
}

// distribution returns the traffic distribution: the field, else the
// topology-mode annotation's Auto (Kubernetes' older switch, or its
// deprecated predecessor). A value it does not know means no preference,
// as the API defines the field: a hint.
func distribution(u *unknownValues, svc *corev1.Service) lb.TrafficDistribution {
	if d := svc.Spec.TrafficDistribution; d != nil && *d != "" {
		var td lb.TrafficDistribution
		if td.UnmarshalText([]byte(*d)) != nil || td == lb.TrafficDistributionDefault {
			u.add("spec.trafficDistribution", *d, "no preference")
		}
		return td
	}
	for _, a := range []string{AnnotationTopologyMode, AnnotationTopologyAwareHints} {
		v, found := svc.Annotations[a]
		switch {
		case !found || v == "" || strings.EqualFold(v, "Disabled"):
		case strings.EqualFold(v, "Auto"):
			return lb.TrafficDistributionPreferSameZone
		default:
			u.add("annotation "+a, v, "Disabled")
		}
	}
	return lb.TrafficDistributionDefault
}

// clusterAffinity drops a cluster affinity annotation lbstate does not
// know (lb.ParseClusterAffinity) from the carried annotations, reporting
// it: the service then converts as without one (none).
func clusterAffinity(u *unknownValues, annotations map[string]string) {
	for _, k := range []string{lb.AnnotationAffinity, lb.AnnotationAffinityAlias} {
		v, found := annotations[k]
		if _, err := lb.ParseClusterAffinity(v); found && err != nil {
			u.add("annotation "+k, v, "none")
			delete(annotations, k)
		}
	}
}

// algorithm reads AnnotationAlgorithm: random or maglev, else the agent's
// default.
func algorithm(u *unknownValues, svc *corev1.Service) lb.Algorithm {
	a, found := svc.Annotations[AnnotationAlgorithm]
	if !found {
		return lb.AlgorithmDefault
	}
	var alg lb.Algorithm
	if alg.UnmarshalText([]byte(a)) != nil || alg == lb.AlgorithmDefault {
		u.add("annotation "+AnnotationAlgorithm, a, "the agent's --lb-algorithm")
		return lb.AlgorithmDefault
	}
	return alg
}

// portProtocols are the protocols of Service and EndpointSlice ports, as
// the API spells them ("" is TCP).
var portProtocols = map[corev1.Protocol]lb.Protocol{
	"": lb.ProtoTCP, corev1.ProtocolTCP: lb.ProtoTCP, corev1.ProtocolUDP: lb.ProtoUDP, corev1.ProtocolSCTP: lb.ProtoSCTP,
}

type fieldError struct {
	field string
	err   error
}

// frontends lists a Service's frontends: per port, its cluster IPs, the
// node's addresses and the node-wide any-address for NodePorts, the
// ingress IPs of a LoadBalancer (servesClass), and its external IPs.
// When the external and internal traffic policies differ, each external
// frontend gets an internal-scope twin, for traffic from inside the
// cluster.
func frontends(svc *corev1.Service, p lb.ServiceParams, opts ServiceOptions, u *unknownValues) ([]lb.FrontendParams, *fieldError) {
	typ := corev1.ServiceType(u.oneOf("spec.type", string(svc.Spec.Type), "ClusterIP", "",
		string(corev1.ServiceTypeClusterIP), string(corev1.ServiceTypeNodePort), string(corev1.ServiceTypeLoadBalancer)))
	clusterIPs := svc.Spec.ClusterIPs
	if len(clusterIPs) == 0 && svc.Spec.ClusterIP != "" {
		clusterIPs = []string{svc.Spec.ClusterIP}
	}
	var families []bool // is4 of each cluster IP
	var cips []netip.Addr
	for i, s := range clusterIPs {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, &fieldError{fmt.Sprintf("spec.clusterIPs[%d]", i), err}
		}
		cips = append(cips, a.Unmap())
		families = append(families, a.Unmap().Is4())
	}
	var lbIPs []netip.Addr
	if typ == corev1.ServiceTypeLoadBalancer && servesClass(svc.Spec.LoadBalancerClass, opts.LoadBalancerClasses) {
		for i, ing := range svc.Status.LoadBalancer.Ingress {
			if ing.IP == "" {
				continue // a hostname-only ingress has no address to match
			}
			if ing.IPMode != nil && u.oneOf(fmt.Sprintf("status.loadBalancer.ingress[%d].ipMode", i), string(*ing.IPMode), "VIP",
				string(corev1.LoadBalancerIPModeVIP), string(corev1.LoadBalancerIPModeProxy)) == string(corev1.LoadBalancerIPModeProxy) {
				continue // the load balancer proxies: traffic arrives for the node, not this IP
			}
			a, err := netip.ParseAddr(ing.IP)
			if err != nil {
				return nil, &fieldError{fmt.Sprintf("status.loadBalancer.ingress[%d].ip", i), err}
			}
			if !slices.Contains(families, a.Unmap().Is4()) {
				continue // a family the Service does not have, as kube-proxy filters it
			}
			lbIPs = append(lbIPs, a.Unmap())
		}
	}
	var extIPs []netip.Addr
	for i, s := range svc.Spec.ExternalIPs {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, &fieldError{fmt.Sprintf("spec.externalIPs[%d]", i), err}
		}
		extIPs = append(extIPs, a.Unmap())
	}
	// A node port set on a NodePort or LoadBalancer service is served, also
	// when allocateLoadBalancerNodePorts is false (it then only stops the
	// API server from allocating one).
	nodePorts := typ == corev1.ServiceTypeNodePort || typ == corev1.ServiceTypeLoadBalancer
	twins := p.ExtTrafficPolicy != p.IntTrafficPolicy
	reserved := opts.NodePortRange
	if reserved == (PortRange{}) {
		reserved = DefaultNodePortRange
	}

	var out []lb.FrontendParams
	seen := map[lb.L3n4Addr]bool{}
	add := func(fe lb.FrontendParams) {
		for _, scope := range []lb.Scope{lb.ScopeExternal, lb.ScopeInternal} {
			if scope == lb.ScopeInternal && (!fe.Type.IsExternal() || !twins) {
				break
			}
			twin := fe
			twin.Address = fe.Address.WithScope(scope)
			if !seen[twin.Address] {
				seen[twin.Address] = true
				out = append(out, twin)
			}
		}
	}
	for i, port := range svc.Spec.Ports {
		proto, known := portProtocols[port.Protocol]
		if !known {
			// No default protocol would be right: the port is left out,
			// the others served.
			u.add(fmt.Sprintf("spec.ports[%d].protocol", i), string(port.Protocol), "no frontend for the port")
			continue
		}
		if port.Port <= 0 || port.Port > 65535 {
			return nil, &fieldError{fmt.Sprintf("spec.ports[%d].port", i), fmt.Errorf("%d is not a port", port.Port)}
		}
		at := func(a netip.Addr, p int32, t lb.SVCType) lb.FrontendParams {
			return lb.FrontendParams{Address: lb.NewL3n4Addr(proto, a, uint16(p), lb.ScopeExternal), Type: t, PortName: port.Name}
		}
		for _, ip := range cips {
			add(at(ip, port.Port, lb.SVCTypeClusterIP))
		}
		if nodePorts && port.NodePort != 0 {
			if port.NodePort < 0 || port.NodePort > 65535 {
				return nil, &fieldError{fmt.Sprintf("spec.ports[%d].nodePort", i), fmt.Errorf("%d is not a port", port.NodePort)}
			}
			// A NodePort exists on an address only because the node has
			// it; inside the reserved range that claim comes first.
			claim := lb.ClaimNodeAddress
			if reserved.Contains(uint16(port.NodePort)) {
				claim = lb.ClaimReservedNodePort
			}
			for _, is4 := range uniqueFamilies(families) {
				anyAddr := netip.IPv6Unspecified()
				if is4 {
					anyAddr = netip.IPv4Unspecified()
				}
				addrs := append([]netip.Addr{anyAddr}, opts.Node.Addresses...)
				for _, a := range addrs {
					if a.Unmap().Is4() == is4 {
						fe := at(a.Unmap(), port.NodePort, lb.SVCTypeNodePort)
						fe.Claim = claim
						add(fe)
					}
				}
			}
		}
		for _, ip := range lbIPs {
			add(at(ip, port.Port, lb.SVCTypeLoadBalancer))
		}
		for _, ip := range extIPs {
			add(at(ip, port.Port, lb.SVCTypeExternalIP))
		}
	}
	return out, nil
}

func uniqueFamilies(families []bool) []bool {
	var out []bool
	for _, f := range families {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// servesClass reports whether a LoadBalancer of the class gets frontends
// for its ingress IPs: always, unless a filter of classes is set.
func servesClass(class *string, filter []string) bool {
	return len(filter) == 0 || class == nil || *class == "" || slices.Contains(filter, *class)
}
