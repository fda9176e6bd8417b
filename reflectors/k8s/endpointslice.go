package k8s

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/lbstate/lbstate/lb"
)

// ConvertEndpointSlice returns the service an EndpointSlice belongs to and
// its backends: every endpoint, in the state its conditions give it
// (endpointState). An error about the whole slice (no service name, a bad
// annotation) means none of it applies; errs about single endpoints mean
// only those were left out.
func ConvertEndpointSlice(es *discoveryv1.EndpointSlice) (name lb.ServiceName, backends []lb.BackendParams, errs []error, err error) {
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
		backends, errs = c.appendEndpoint(backends, errs, i, ep, endpointState(ep.Conditions))
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
			var known bool
			if proto, known = portProtocols[*p.Protocol]; !known {
				// A protocol we do not know (newer than us): its Service's
				// port has no frontend either, and says so in the log.
				continue
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
				Address: lb.NewL3n4Addr(p.proto, a, p.port, lb.ScopeExternal),
				Weight:  w,
				State:   state,
			}.WithPortNames(p.names...).WithTopologyHints(zones, nodes)
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

// endpointState is the backend state of an endpoint with conditions c, as
// the EndpointSlice API defines them and kube-proxy reads them (ready and
// serving nil mean true, terminating nil means false):
//   - ready: active, whatever terminating says (the slice controller
//     marks terminating endpoints of a Service with
//     publishNotReadyAddresses ready, and that is how the flag reaches
//     us);
//   - not ready, serving and terminating: terminating, taking new flows
//     only when nothing is ready;
//   - anything else: not-ready, taking no new flows but kept, so that the
//     connections it carries survive a failed readiness probe or a drain.
func endpointState(c discoveryv1.EndpointConditions) lb.BackendState {
	ready := c.Ready == nil || *c.Ready
	serving := c.Serving == nil || *c.Serving
	terminating := c.Terminating != nil && *c.Terminating
	switch {
	case ready:
		return lb.BackendActive
	case serving && terminating:
		return lb.BackendTerminating
	}
	return lb.BackendNotReady
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
