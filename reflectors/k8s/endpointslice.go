package k8s

import (
	"encoding/binary"
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
// only those were left out. The backends of one port share their
// PortNames.
func ConvertEndpointSlice(es *discoveryv1.EndpointSlice) (name lb.ServiceName, backends []lb.BackendParams, errs []error, err error) {
	svcName := es.Labels[LabelServiceName]
	if svcName == "" {
		return name, nil, nil, fmt.Errorf("endpointslice %s/%s: label %s: missing", es.Namespace, es.Name, LabelServiceName)
	}
	name = lb.NewServiceName(es.Namespace, svcName)
	backends, errs, err = appendSliceBackends(nil, es)
	return name, backends, errs, err
}

// appendSliceBackends appends the backends of a slice (of any service
// name) to backends, as ConvertEndpointSlice converts them.
func appendSliceBackends(backends []lb.BackendParams, es *discoveryv1.EndpointSlice) ([]lb.BackendParams, []error, error) {
	switch es.AddressType {
	case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6:
	default:
		return backends, nil, nil // FQDN slices have no addresses to balance to
	}
	var ports [2]slicePort
	c, err := newSliceConverter(es, ports[:0])
	if err != nil {
		return backends, nil, err
	}
	for i := range c.ports {
		if p := &c.ports[i]; len(p.names) > 0 {
			p.named = p.named.WithPortNames(p.names...)
		}
	}
	var errs []error
	for i, ep := range es.Endpoints {
		backends, errs = c.appendEndpoint(backends, errs, es, i, ep, endpointState(ep.Conditions))
	}
	return backends, errs, nil
}

// sliceConverter holds what applies to every endpoint of one slice. It
// lives on its caller's stack, its ports in the caller's buffer, so that
// it allocates nothing for a slice with a few ports and no weights
// annotation. (It is built and returned by value and does not keep the
// slice: escape analysis moves a buffer to the heap once anything stores
// into it through a pointer, or once the struct holding it holds anything
// an error message takes along.)
type sliceConverter struct {
	weight  uint16                // AnnotationWeight
	weights map[netip.Addr]uint16 // AnnotationWeights, nil without
	ports   []slicePort
}

// slicePort is one port and protocol of a slice, with the names the slice
// gives it (a port may be listed under several names).
type slicePort struct {
	port  uint16
	proto lb.Protocol
	names []string
	// named is a backend with the port's names (PortNames), made once for
	// the slice's backends of this port: making them for each backend
	// looked their shared list up each time (lb.BackendParams.WithPortNames).
	named lb.BackendParams
}

// where names a slice in errors.
func where(es *discoveryv1.EndpointSlice) string {
	return fmt.Sprintf("endpointslice %s/%s", es.Namespace, es.Name)
}

// newSliceConverter reads what applies to every endpoint of a slice, its
// ports appended to buf.
func newSliceConverter(es *discoveryv1.EndpointSlice, buf []slicePort) (sliceConverter, error) {
	c := sliceConverter{weight: lb.DefaultBackendWeight}
	var err error
	if w, found := es.Annotations[AnnotationWeight]; found {
		if c.weight, err = parseWeight(w); err != nil {
			return c, fmt.Errorf("%s: annotation %s: %w", where(es), AnnotationWeight, err)
		}
	}
	if c.weights, err = parseWeights(es.Annotations[AnnotationWeights]); err != nil {
		return c, fmt.Errorf("%s: annotation %s: %w", where(es), AnnotationWeights, err)
	}
	c.ports, err = slicePorts(es, buf)
	return c, err
}

// slicePorts appends the ports of a slice to out, in the order they
// first appear.
func slicePorts(es *discoveryv1.EndpointSlice, out []slicePort) ([]slicePort, error) {
	for i, p := range es.Ports {
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
			return nil, fmt.Errorf("%s: ports[%d].port: %d is not a port", where(es), i, *p.Port)
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
func (c *sliceConverter) appendEndpoint(backends []lb.BackendParams, errs []error, es *discoveryv1.EndpointSlice, i int, ep discoveryv1.Endpoint, state lb.BackendState) ([]lb.BackendParams, []error) {
	var zones, nodes []string
	if h := ep.Hints; h != nil {
		for _, z := range h.ForZones {
			zones = append(zones, z.Name)
		}
		for _, n := range h.ForNodes {
			nodes = append(nodes, n.Name)
		}
	}
	addressType := es.AddressType
	for j, s := range ep.Addresses {
		a, err := netip.ParseAddr(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: endpoints[%d].addresses[%d]: %w", where(es), i, j, err))
			continue
		}
		a = a.Unmap()
		if a.Is4() != (addressType == discoveryv1.AddressTypeIPv4) {
			errs = append(errs, fmt.Errorf("%s: endpoints[%d].addresses[%d]: %s is not of address type %s", where(es), i, j, a, addressType))
			continue
		}
		w := c.weight
		if aw, ok := c.weights[a]; ok {
			w = aw
		}
		for k := range c.ports {
			p := &c.ports[k]
			b := p.named
			b.Address, b.Weight, b.State = lb.NewL3n4Addr(p.proto, a, p.port, lb.ScopeExternal), w, state
			if len(zones) > 0 || len(nodes) > 0 { // most endpoints have no hints: one lookup of the shared lists, not two
				b = b.WithTopologyHints(zones, nodes)
			}
			if ep.NodeName != nil {
				b.NodeName = *ep.NodeName
			}
			if ep.Zone != nil {
				b.Zone = *ep.Zone
			}
			if err := b.Validate(); err != nil {
				errs = append(errs, fmt.Errorf("%s: endpoints[%d].addresses[%d]: %w", where(es), i, j, err))
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

// parseWeights parses "addr=weight,addr=weight" (nil when empty).
func parseWeights(s string) (map[netip.Addr]uint16, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := map[netip.Addr]uint16{}
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

// addrBit is one of 64 bits, picked by a hash of the address: a set of
// addresses whose bits are ORed says surely which addresses are not in it
// (backendsOf).
func addrBit(a lb.L3n4Addr) uint64 {
	ip := a.As16()
	h := binary.LittleEndian.Uint64(ip[:8])*0x9e3779b97f4a7c15 ^ binary.BigEndian.Uint64(ip[8:]) ^
		uint64(a.Port())<<40 ^ uint64(a.Protocol())<<56
	// MurmurHash3's finalizer: every input bit moves the top six.
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	return 1 << (h >> 58)
}
