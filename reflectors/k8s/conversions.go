// Package k8s turns Kubernetes Services and EndpointSlices into lbstate's
// model, the way kube-proxy and Cilium interpret them. The conversions
// here are pure (objects in, lb values out), so that every source of
// Kubernetes objects (the API server, a directory of manifests) shares
// them.
package k8s

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
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
	// LoadBalancerClasses are the classes this agent implements; a
	// LoadBalancer of another class gets no frontends for its ingress IPs.
	// A LoadBalancer without a class is always ours.
	LoadBalancerClasses []string
	// Source is the source the declarations are made as (default k8s).
	Source lb.Source
}

// ConvertService returns the declaration of a Service. ok is false for
// Services lbstate does not balance (ExternalName, headless); an error
// names the Service and the field that is wrong, and means nothing of the
// Service should be declared.
func ConvertService(svc *corev1.Service, opts ServiceOptions) (params lb.ServiceParams, ok bool, err error) {
	name := lb.NewServiceName(svc.Namespace, svc.Name)
	fail := func(field string, err error) (lb.ServiceParams, bool, error) {
		return lb.ServiceParams{}, false, fmt.Errorf("service %s: %s: %w", name, field, err)
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return lb.ServiceParams{}, false, nil
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return lb.ServiceParams{}, false, nil
	}
	src := opts.Source
	if src == 0 {
		src = lb.SourceK8s
	}
	params = lb.ServiceParams{
		Name:                name,
		Source:              src,
		ExtTrafficPolicy:    trafficPolicy(string(svc.Spec.ExternalTrafficPolicy)),
		HealthCheckNodePort: uint16(svc.Spec.HealthCheckNodePort),
		Annotations:         healthCheckAnnotations(svc),
	}
	if p := svc.Spec.InternalTrafficPolicy; p != nil {
		params.IntTrafficPolicy = trafficPolicy(string(*p))
	}
	if svc.Spec.HealthCheckNodePort < 0 || svc.Spec.HealthCheckNodePort > 65535 {
		return fail("spec.healthCheckNodePort", fmt.Errorf("%d is not a port", svc.Spec.HealthCheckNodePort))
	}
	if err := params.TrafficDistribution.UnmarshalText([]byte(distribution(svc))); err != nil {
		return fail("spec.trafficDistribution", err)
	}
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		params.SessionAffinity = true
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			t := *c.ClientIP.TimeoutSeconds
			if t <= 0 || t > 86400 {
				return fail("spec.sessionAffinityConfig.clientIP.timeoutSeconds", fmt.Errorf("%d is not in 1-86400", t))
			}
			params.SessionAffinityTimeout = uint32(t)
		}
	}
	if a, found := svc.Annotations[AnnotationAlgorithm]; found {
		if err := params.Algorithm.UnmarshalText([]byte(a)); err != nil || params.Algorithm == lb.AlgorithmDefault {
			return fail("annotation "+AnnotationAlgorithm, fmt.Errorf("%q: want random or maglev", a))
		}
	}
	for i, r := range svc.Spec.LoadBalancerSourceRanges {
		prefix, err := netip.ParsePrefix(strings.TrimSpace(r))
		if err != nil {
			return fail(fmt.Sprintf("spec.loadBalancerSourceRanges[%d]", i), err)
		}
		params.SourceRanges = append(params.SourceRanges, prefix.Masked())
	}
	fes, ferr := frontends(svc, params, opts)
	if ferr != nil {
		return fail(ferr.field, ferr.err)
	}
	params.Frontends = fes
	if err := params.Validate(); err != nil {
		return lb.ServiceParams{}, false, err
	}
	return params, true, nil
}

func trafficPolicy(p string) lb.TrafficPolicy {
	if p == "Local" {
		return lb.TrafficPolicyLocal
	}
	return lb.TrafficPolicyCluster
}

// distribution returns the trafficDistribution to use: the field, else
// the topology-mode annotation's Auto (Kubernetes' older switch).
func distribution(svc *corev1.Service) string {
	if d := svc.Spec.TrafficDistribution; d != nil && *d != "" {
		return *d
	}
	if strings.EqualFold(svc.Annotations[AnnotationTopologyMode], "Auto") ||
		strings.EqualFold(svc.Annotations[AnnotationTopologyAwareHints], "Auto") {
		return "PreferSameZone"
	}
	return "Default"
}

type fieldError struct {
	field string
	err   error
}

// frontends lists a Service's frontends: per port, its cluster IPs, the
// node's addresses and the node-wide any-address for NodePorts, the
// ingress IPs of a LoadBalancer it owns, and its external IPs. When the
// external and internal traffic policies differ, each external frontend
// gets an internal-scope twin, for traffic from inside the cluster.
func frontends(svc *corev1.Service, p lb.ServiceParams, opts ServiceOptions) ([]lb.FrontendParams, *fieldError) {
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
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer && ownsClass(svc.Spec.LoadBalancerClass, opts.LoadBalancerClasses) {
		for i, ing := range svc.Status.LoadBalancer.Ingress {
			if ing.IP == "" {
				continue // a hostname-only ingress has no address to match
			}
			if ing.IPMode != nil && *ing.IPMode == corev1.LoadBalancerIPModeProxy {
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
	nodePorts := svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer
	twins := p.ExtTrafficPolicy != p.IntTrafficPolicy

	var out []lb.FrontendParams
	seen := map[lb.L3n4Addr]bool{}
	add := func(a lb.L3n4Addr, typ lb.SVCType, portName string) {
		for _, scope := range []lb.Scope{lb.ScopeExternal, lb.ScopeInternal} {
			if scope == lb.ScopeInternal && (!typ.IsExternal() || !twins) {
				break
			}
			fa := a.WithScope(scope)
			if !seen[fa] {
				seen[fa] = true
				out = append(out, lb.FrontendParams{Address: fa, Type: typ, PortName: portName})
			}
		}
	}
	for i, port := range svc.Spec.Ports {
		proto, err := lb.ParseProtocol(string(port.Protocol))
		if port.Protocol == "" {
			proto, err = lb.ProtoTCP, nil
		}
		if err != nil {
			return nil, &fieldError{fmt.Sprintf("spec.ports[%d].protocol", i), err}
		}
		if port.Port <= 0 || port.Port > 65535 {
			return nil, &fieldError{fmt.Sprintf("spec.ports[%d].port", i), fmt.Errorf("%d is not a port", port.Port)}
		}
		at := func(a netip.Addr, p int32) lb.L3n4Addr { return lb.NewL3n4Addr(proto, a, uint16(p), lb.ScopeExternal) }
		for _, ip := range cips {
			add(at(ip, port.Port), lb.SVCTypeClusterIP, port.Name)
		}
		if nodePorts && port.NodePort != 0 {
			if port.NodePort < 0 || port.NodePort > 65535 {
				return nil, &fieldError{fmt.Sprintf("spec.ports[%d].nodePort", i), fmt.Errorf("%d is not a port", port.NodePort)}
			}
			for _, is4 := range uniqueFamilies(families) {
				anyAddr := netip.IPv6Unspecified()
				if is4 {
					anyAddr = netip.IPv4Unspecified()
				}
				add(at(anyAddr, port.NodePort), lb.SVCTypeNodePort, port.Name)
				for _, na := range opts.Node.Addresses {
					if na.Unmap().Is4() == is4 {
						add(at(na.Unmap(), port.NodePort), lb.SVCTypeNodePort, port.Name)
					}
				}
			}
		}
		for _, ip := range lbIPs {
			add(at(ip, port.Port), lb.SVCTypeLoadBalancer, port.Name)
		}
		for _, ip := range extIPs {
			add(at(ip, port.Port), lb.SVCTypeExternalIP, port.Name)
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

func ownsClass(class *string, owned []string) bool {
	return class == nil || *class == "" || slices.Contains(owned, *class)
}

// ConvertEndpointSlice returns the service an EndpointSlice belongs to and
// its backends. An error about the whole slice (no service name, a bad
// annotation) means none of it applies; errs about single endpoints mean
// only those were left out. publishNotReady (the Service's
// publishNotReadyAddresses) makes not-ready endpoints active.
func ConvertEndpointSlice(es *discoveryv1.EndpointSlice, publishNotReady bool) (name lb.ServiceName, backends []lb.BackendParams, errs []error, err error) {
	svcName := es.Labels[LabelServiceName]
	if svcName == "" {
		return name, nil, nil, fmt.Errorf("endpointslice %s/%s: label %s: missing", es.Namespace, es.Name, LabelServiceName)
	}
	name = lb.NewServiceName(es.Namespace, svcName)
	switch es.AddressType {
	case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6:
	default:
		return name, nil, nil, nil // FQDN slices have no addresses to balance to
	}
	c, err := newSliceConverter(es)
	if err != nil {
		return name, nil, nil, err
	}
	for i, ep := range es.Endpoints {
		if state, use := endpointState(ep.Conditions, publishNotReady); use {
			backends, errs = c.appendEndpoint(backends, errs, i, ep, state)
		}
	}
	return name, backends, errs, nil
}

// sliceConverter holds what applies to every endpoint of one slice.
type sliceConverter struct {
	where       string // the slice, for errors
	addressType discoveryv1.AddressType
	weight      uint16                // AnnotationWeight
	weights     map[netip.Addr]uint16 // AnnotationWeights
	ports       []slicePort
}

// slicePort is one port and protocol of a slice, with the names the slice
// gives it (a port may be listed under several names).
type slicePort struct {
	port  uint16
	proto lb.Protocol
	names []string
}

func newSliceConverter(es *discoveryv1.EndpointSlice) (*sliceConverter, error) {
	c := &sliceConverter{
		where:       fmt.Sprintf("endpointslice %s/%s", es.Namespace, es.Name),
		addressType: es.AddressType,
		weight:      lb.DefaultBackendWeight,
	}
	var err error
	if w, found := es.Annotations[AnnotationWeight]; found {
		if c.weight, err = parseWeight(w); err != nil {
			return nil, fmt.Errorf("%s: annotation %s: %w", c.where, AnnotationWeight, err)
		}
	}
	if c.weights, err = parseWeights(es.Annotations[AnnotationWeights]); err != nil {
		return nil, fmt.Errorf("%s: annotation %s: %w", c.where, AnnotationWeights, err)
	}
	c.ports, err = slicePorts(es.Ports, c.where)
	return c, err
}

// slicePorts returns the ports of a slice in the order they first appear.
func slicePorts(ports []discoveryv1.EndpointPort, where string) ([]slicePort, error) {
	var out []slicePort
	for i, p := range ports {
		if p.Port == nil {
			continue // all ports: nothing to balance to
		}
		proto := lb.ProtoTCP
		if p.Protocol != nil {
			var err error
			if proto, err = lb.ParseProtocol(string(*p.Protocol)); err != nil {
				return nil, fmt.Errorf("%s: ports[%d].protocol: %w", where, i, err)
			}
		}
		if *p.Port <= 0 || *p.Port > 65535 {
			return nil, fmt.Errorf("%s: ports[%d].port: %d is not a port", where, i, *p.Port)
		}
		port := uint16(*p.Port)
		j := slices.IndexFunc(out, func(o slicePort) bool { return o.port == port && o.proto == proto })
		if j < 0 {
			out = append(out, slicePort{port: port, proto: proto})
			j = len(out) - 1
		}
		if p.Name != nil && *p.Name != "" {
			out[j].names = append(out[j].names, *p.Name)
		}
	}
	return out, nil
}

// appendEndpoint appends the backends of endpoint i (one per address and
// port) to backends, and what is wrong with its addresses to errs.
func (c *sliceConverter) appendEndpoint(backends []lb.BackendParams, errs []error, i int, ep discoveryv1.Endpoint, state lb.BackendState) ([]lb.BackendParams, []error) {
	var zones, nodes []string
	if h := ep.Hints; h != nil {
		for _, z := range h.ForZones {
			zones = append(zones, z.Name)
		}
		for _, n := range h.ForNodes {
			nodes = append(nodes, n.Name)
		}
	}
	for j, s := range ep.Addresses {
		a, err := netip.ParseAddr(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: endpoints[%d].addresses[%d]: %w", c.where, i, j, err))
			continue
		}
		a = a.Unmap()
		if a.Is4() != (c.addressType == discoveryv1.AddressTypeIPv4) {
			errs = append(errs, fmt.Errorf("%s: endpoints[%d].addresses[%d]: %s is not of address type %s", c.where, i, j, a, c.addressType))
			continue
		}
		w := c.weight
		if aw, ok := c.weights[a]; ok {
			w = aw
		}
		for _, p := range c.ports {
			b := lb.BackendParams{
				Address:   lb.NewL3n4Addr(p.proto, a, p.port, lb.ScopeExternal),
				PortNames: slices.Clone(p.names),
				Weight:    w,
				State:     state,
				ForZones:  zones,
				ForNodes:  nodes,
			}
			if ep.NodeName != nil {
				b.NodeName = *ep.NodeName
			}
			if ep.Zone != nil {
				b.Zone = *ep.Zone
			}
			if err := b.Validate(); err != nil {
				errs = append(errs, fmt.Errorf("%s: endpoints[%d].addresses[%d]: %w", c.where, i, j, err))
				continue
			}
			backends = append(backends, b)
		}
	}
	return backends, errs
}

// endpointState maps an endpoint's conditions to a backend state, the way
// kube-proxy reads them: ready is active; serving and terminating is
// terminating (used only when nothing is ready); anything else is left
// out, unless the Service publishes not-ready addresses.
func endpointState(c discoveryv1.EndpointConditions, publishNotReady bool) (lb.BackendState, bool) {
	ready := c.Ready == nil || *c.Ready
	serving := ready
	if c.Serving != nil {
		serving = *c.Serving
	}
	terminating := c.Terminating != nil && *c.Terminating
	switch {
	case ready && !terminating, publishNotReady:
		return lb.BackendActive, true
	case serving && terminating:
		return lb.BackendTerminating, true
	}
	return 0, false
}

func parseWeight(s string) (uint16, error) {
	w, err := strconv.ParseUint(strings.TrimSpace(s), 10, 16)
	if err != nil {
		return 0, fmt.Errorf("%q is not a weight from 0 to 65535", s)
	}
	return uint16(w), nil
}

// parseWeights parses "addr=weight,addr=weight".
func parseWeights(s string) (map[netip.Addr]uint16, error) {
	out := map[netip.Addr]uint16{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, item := range strings.Split(s, ",") {
		k, v, found := strings.Cut(strings.TrimSpace(item), "=")
		if !found {
			return nil, fmt.Errorf("%q: want address=weight", item)
		}
		a, err := netip.ParseAddr(strings.TrimSpace(k))
		if err != nil {
			return nil, fmt.Errorf("%q: %w", item, err)
		}
		w, err := parseWeight(v)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", item, err)
		}
		out[a.Unmap()] = w
	}
	return out, nil
}
