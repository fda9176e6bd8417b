package clustermesh

import (
	"net/netip"
	"slices"

	"github.com/lbstate/lbstate/lb"
)

// LocalBackends converts a validated remote service into the backends it
// offers the local service of the same namespace and name: one per
// address, port and protocol, carrying every port name served there (the
// local frontends pick them by name) and the remote cluster's ID. A
// service that is not shared offers nothing. The result is sorted by
// address.
func (s *ClusterService) LocalBackends() []lb.BackendParams {
	if !s.Shared {
		return nil
	}
	type l4 struct {
		proto lb.Protocol
		port  uint16
		names []string
	}
	out := make([]lb.BackendParams, 0, len(s.Backends))
	var ports []l4 // per address; a handful, searched in order
	for addr, byName := range s.Backends {
		a := netip.MustParseAddr(addr).Unmap()
		ports = ports[:0]
		for name, p := range byName {
			proto, _ := lb.ParseProtocol(p.Protocol) // Validate checked it
			i := slices.IndexFunc(ports, func(k l4) bool { return k.proto == proto && k.port == p.Port })
			if i < 0 {
				ports = append(ports, l4{proto: proto, port: p.Port})
				i = len(ports) - 1
			}
			// An unnamed port is a single-port service's: no name, which
			// serves every frontend of the protocol.
			if name != "" {
				ports[i].names = append(ports[i].names, name)
			}
		}
		for _, k := range ports {
			slices.Sort(k.names)
			b := lb.BackendParams{
				Address:   lb.NewL3n4Addr(k.proto, a, k.port, lb.ScopeExternal),
				Weight:    lb.DefaultBackendWeight,
				ClusterID: s.ClusterID,
			}.WithPortNames(k.names...)
			if z, ok := s.Zones[addr]; ok {
				b.Zone = z.Zone
				var forZones []string
				for _, f := range z.ForZones {
					forZones = append(forZones, f.Name)
				}
				b = b.WithTopologyHints(forZones, nil)
			}
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(x, y lb.BackendParams) int { return x.Address.Compare(y.Address) })
	return out
}
