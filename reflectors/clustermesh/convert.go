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
	}
	var out []lb.BackendParams
	for addr, ports := range s.Backends {
		a := netip.MustParseAddr(addr).Unmap()
		names := map[l4][]string{}
		for name, p := range ports {
			proto, _ := lb.ParseProtocol(p.Protocol) // Validate checked it
			k := l4{proto, p.Port}
			ns := names[k]
			// An unnamed port is a single-port service's: no name, which
			// serves every frontend of the protocol.
			if name != "" {
				ns = append(ns, name)
			}
			names[k] = ns
		}
		for k, ns := range names {
			slices.Sort(ns)
			b := lb.BackendParams{
				Address:   lb.NewL3n4Addr(k.proto, a, k.port, lb.ScopeExternal),
				PortNames: ns,
				Weight:    lb.DefaultBackendWeight,
				ClusterID: s.ClusterID,
			}
			if z, ok := s.Zones[addr]; ok {
				b.Zone = z.Zone
				for _, f := range z.ForZones {
					b.ForZones = append(b.ForZones, f.Name)
				}
			}
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(x, y lb.BackendParams) int { return x.Address.Compare(y.Address) })
	return out
}
