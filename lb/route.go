package lb

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaxRouteBackends bounds the backend services of one route: Gateway API
// allows 16 backendRefs per rule; SMI sets no limit, and this one only
// keeps a route's selection cheap.
const MaxRouteBackends = 256

// Route is a traffic split: the new flows of a service's frontends go to
// other services' backends, each service taking its weight's share
// (weight / sum of weights), divided among its backends by their own
// weights. It is kept beside the service (Writer.SetRoute), like a
// Redirect, so it may come before the service and survives every upsert;
// clearing it gives the service its own backends back. A Redirect in
// force on a frontend outranks a route.
//
// A route with Port 0 covers every frontend of the service; with a Port,
// the frontends of that service port: the frontends sharing the port name
// of the ClusterIP frontend at that port (its NodePort and LoadBalancer
// twins too). A source sets at most one route per (service, Port); for a
// frontend, the highest-priority source's route covering it is in force,
// a route naming its port before one for all ports.
type Route struct {
	Source Source `json:"source" yaml:"source"`
	// Name says what declared the route, for reports: "HTTPRoute default/web".
	Name     string         `json:"name,omitempty" yaml:"name,omitempty"`
	Port     uint16         `json:"port,omitempty" yaml:"port,omitempty"`
	Backends []RouteBackend `json:"backends" yaml:"backends"`
}

// RouteBackend is one service a route sends a share of the flows to.
type RouteBackend struct {
	Service ServiceName `json:"service" yaml:"service"`
	// Port is the backend service's port whose backends serve the flows
	// (the frontend at that port number and the routed frontend's
	// protocol names them); 0 means the routed frontend's own service
	// port number (SMI names no ports: a canary has the apex's ports).
	Port uint16 `json:"port,omitempty" yaml:"port,omitempty"`
	// Weight is relative to the other backends' of the route; 0 sends no
	// new flows (the service's backends stay on standby for the flows
	// they carry).
	Weight uint32 `json:"weight" yaml:"weight"`
	// Rejected says that the source found the ref invalid (a kind that
	// is not a Service, another namespace without a ReferenceGrant): its
	// share of new flows is rejected, as the Gateway API requires, and
	// Service (which may be empty) is not used.
	Rejected bool `json:"rejected,omitempty" yaml:"rejected,omitempty"`
}

// Validate reports what is wrong with a route of service name.
func (r Route) Validate(name ServiceName) error {
	if !r.Source.Valid() {
		return fmt.Errorf("service %s: route source: unknown source %s", name, r.Source)
	}
	if len(r.Backends) > MaxRouteBackends {
		return fmt.Errorf("service %s: route %s: backends: %d services, at most %d", name, r.Name, len(r.Backends), MaxRouteBackends)
	}
	for i, b := range r.Backends {
		if b.Rejected && b.Service.IsZero() {
			continue
		}
		if err := b.Service.Validate(); err != nil {
			return fmt.Errorf("service %s: route %s: backends[%d].service: %w", name, r.Name, i, err)
		}
	}
	return nil
}

// Covers reports whether the route applies to a frontend of service port
// port (see Route).
func (r Route) Covers(port uint16) bool { return r.Port == 0 || r.Port == port }

// Equal reports whether two routes are the same.
func (r Route) Equal(o Route) bool {
	return r.Source == o.Source && r.Name == o.Name && r.Port == o.Port && slices.Equal(r.Backends, o.Backends)
}

func (r Route) String() string {
	parts := make([]string, len(r.Backends))
	for i, b := range r.Backends {
		parts[i] = b.Service.String()
		if b.Port != 0 {
			parts[i] += ":" + strconv.Itoa(int(b.Port))
		}
		parts[i] += "=" + strconv.FormatUint(uint64(b.Weight), 10)
		if b.Rejected {
			parts[i] += "(rejected)"
		}
	}
	s := r.Name
	if s == "" {
		s = "route"
	}
	if r.Port != 0 {
		s += " port " + strconv.Itoa(int(r.Port))
	}
	return s + " (" + r.Source.String() + "): " + strings.Join(parts, " ")
}

// compareRoutes orders a service's routes: by source priority, then a
// route naming a port before the one for all ports, then by port.
func compareRoutes(a, b Route) int {
	if a.Source != b.Source {
		return a.Source.Compare(b.Source)
	}
	if (a.Port == 0) != (b.Port == 0) {
		if a.Port == 0 {
			return 1
		}
		return -1
	}
	return cmp.Compare(a.Port, b.Port)
}

// RouteFor returns the route in force on a frontend of service port port,
// or nil.
func (s *Service) RouteFor(port uint16) *Route {
	routes := s.Routes()
	for i := range routes {
		if routes[i].Covers(port) {
			return &routes[i]
		}
	}
	return nil
}

// WithRoute returns a copy with r in place of the route of r's source and
// port.
func (s *Service) WithRoute(r Route) *Service {
	return s.withOverrides(func(o *serviceOverrides) {
		o.routes = slices.Clone(o.routes)
		i, found := slices.BinarySearchFunc(o.routes, r, compareRoutes)
		if found {
			o.routes[i] = r
		} else {
			o.routes = slices.Insert(o.routes, i, r)
		}
	})
}

// WithoutRoute returns a copy without the route of source src and port
// port.
func (s *Service) WithoutRoute(src Source, port uint16) *Service {
	return s.withOverrides(func(o *serviceOverrides) {
		o.routes = slices.DeleteFunc(slices.Clone(o.routes), func(r Route) bool { return r.Source == src && r.Port == port })
	})
}

// WithoutRoutes returns a copy without any route of source src.
func (s *Service) WithoutRoutes(src Source) *Service {
	return s.withOverrides(func(o *serviceOverrides) {
		o.routes = slices.DeleteFunc(slices.Clone(o.routes), func(r Route) bool { return r.Source == src })
	})
}

// ServicePort returns the service port of frontend fe of p: the port of
// the ClusterIP frontend with fe's port name and protocol, or fe's own
// port when there is none (a service without a ClusterIP).
func (p *ServiceParams) ServicePort(fe FrontendParams) uint16 {
	if fe.Type == SVCTypeClusterIP {
		return fe.Address.Port()
	}
	for _, o := range p.Frontends {
		if o.Type == SVCTypeClusterIP && o.PortName == fe.PortName && o.Address.Protocol() == fe.Address.Protocol() {
			return o.Address.Port()
		}
	}
	return fe.Address.Port()
}

// PortNameOf returns the port name of p's frontends at service port
// port and protocol proto (its ClusterIP frontend first), and whether p
// has such a port.
func (p *ServiceParams) PortNameOf(port uint16, proto Protocol) (string, bool) {
	found, name := false, ""
	for _, o := range p.Frontends {
		if o.Address.Port() != port || o.Address.Protocol() != proto {
			continue
		}
		if o.Type == SVCTypeClusterIP {
			return o.PortName, true
		}
		if !found {
			found, name = true, o.PortName
		}
	}
	return name, found
}
