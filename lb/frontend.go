package lb

import (
	"strconv"
	"strings"

	"github.com/cilium/statedb/reconciler"
)

// BackendRef is a backend as one frontend uses it: the result of backend
// selection, with everything the datapath needs.
type BackendRef struct {
	Address L3n4Addr `json:"address" yaml:"address"`

	// Weight is the effective weight. Backends kept only for the flows
	// they already carry (terminating while active ones exist, quarantined,
	// maintenance, not-ready) have weight 0.
	Weight uint16 `json:"weight" yaml:"weight"`

	// State is the effective state: an unhealthy active backend shows as
	// quarantined.
	State     BackendState `json:"state" yaml:"state"`
	ClusterID uint32       `json:"clusterID,omitempty" yaml:"clusterID,omitempty"`
	Zone      string       `json:"zone,omitempty" yaml:"zone,omitempty"`
}

func (r BackendRef) String() string {
	s := r.Address.String()
	var attrs []string
	if r.State != BackendActive {
		attrs = append(attrs, r.State.String())
	}
	if r.Weight != DefaultBackendWeight {
		attrs = append(attrs, "weight="+strconv.Itoa(int(r.Weight)))
	}
	if len(attrs) > 0 {
		s += " (" + strings.Join(attrs, " ") + ")"
	}
	return s
}

// RejectString prints a frontend's rejected share (Frontend.Rejected)
// among its backends: "reject (weight=N)".
func RejectString(weight uint16) string {
	return "reject (weight=" + strconv.Itoa(int(weight)) + ")"
}

// Frontend is a row of the frontends table: one address the datapath
// matches, the service that owns it, and the backends selected for it.
// The Writer derives frontends from services, backends and the local node;
// the reconciler writes them into the datapath's maps and records Status.
type Frontend struct {
	FrontendParams `yaml:",inline"`

	Service ServiceName `json:"service" yaml:"service"`

	// Policy is the owning service's declaration in force. It is shared
	// with the services table and must not be modified. Encoded (JSON,
	// YAML), it leaves out the service's frontend list: the services
	// table has it.
	Policy *ServiceParams `json:"policy" yaml:"policy"`

	// RedirectedTo names the service whose backends replace this
	// service's, when a redirect is set.
	RedirectedTo ServiceName `json:"redirectedTo,omitzero" yaml:"redirectedTo,omitempty"`

	// SkipFromBackend says that the redirect leaves the traffic of its own
	// backends (the clients that are one of Backends) to Hidden: the
	// redirect's SkipFromBackend.
	SkipFromBackend bool `json:"skipFromBackend,omitempty" yaml:"skipFromBackend,omitempty"`

	// RoutedBy names the route (Route.Name) whose split chose the
	// backends, when one is in force and no redirect is.
	RoutedBy string `json:"routedBy,omitempty" yaml:"routedBy,omitempty"`

	// ProxyPort, when not 0, sends new flows to the L7 proxy on this node
	// listening on this port; Backends stay for the proxy to use.
	ProxyPort uint16 `json:"proxyPort,omitempty" yaml:"proxyPort,omitempty"`

	// Backends are the selected backends, the ones taking new flows (weight
	// above 0) first, each group sorted by address.
	Backends []BackendRef `json:"backends" yaml:"backends"`

	// Rejected is the weight, on the scale of Backends' weights, of the
	// share of new flows that the datapath rejects: a route's backend
	// services that do not resolve (missing, without the port, or without
	// a backend taking new flows) keep their share, as the Gateway API
	// requires, instead of handing it to the others. 0 for none.
	Rejected uint16 `json:"rejected,omitempty" yaml:"rejected,omitempty"`

	// Hidden are, while a redirect or a route is in force, the backends
	// the frontend would have without it (selected as Backends are). The
	// reconciler keeps their IDs, so that clearing the override gives back
	// the maps as they were, and with SkipFromBackend writes them as the
	// fallback slots that the redirect's own backends are sent to.
	Hidden []BackendRef `json:"hidden,omitempty" yaml:"hidden,omitempty"`

	// TopologyLevel is, for a service with topology keys, the key whose
	// level was selected ("*" for the fallback to all), or
	// TopologyLevelNone when strict keys left no backend for new flows on
	// this node. Empty without topology keys.
	TopologyLevel string `json:"topologyLevel,omitempty" yaml:"topologyLevel,omitempty"`

	// ID is the frontend's ID in the datapath (its rev-NAT ID), set by the
	// reconciler; 0 until the frontend is first reconciled.
	ID uint32 `json:"id,omitempty" yaml:"id,omitempty"`

	Status reconciler.Status `json:"status" yaml:"status"`
}

// Clone returns a shallow copy.
func (f *Frontend) Clone() *Frontend {
	c := *f
	return &c
}

// GetStatus and SetStatus let statedb's reconciler track the frontend.
func (f *Frontend) GetStatus() reconciler.Status { return f.Status }

func (f *Frontend) SetStatus(s reconciler.Status) *Frontend {
	f.Status = s
	return f
}

func (f *Frontend) TableHeader() []string {
	return []string{"Address", "Type", "Service", "PortName", "Backends", "RedirectTo", "Proxy", "ID", "Status", "Topology"}
}

func (f *Frontend) TableRow() []string {
	backends := make([]string, len(f.Backends), len(f.Backends)+1)
	for i, b := range f.Backends {
		backends[i] = b.String()
	}
	if f.Rejected > 0 {
		backends = append(backends, RejectString(f.Rejected))
	}
	redirect, proxy := "", ""
	if !f.RedirectedTo.IsZero() {
		redirect = f.RedirectedTo.String()
		if f.SkipFromBackend {
			redirect += " (skip-from-backend)"
		}
	} else if f.RoutedBy != "" {
		redirect = "route " + f.RoutedBy
	}
	if f.ProxyPort != 0 {
		proxy = strconv.Itoa(int(f.ProxyPort))
	}
	id := ""
	if f.ID != 0 {
		id = strconv.FormatUint(uint64(f.ID), 10)
	}
	return []string{
		f.Address.String(), f.Type.String(), f.Service.String(), f.PortName,
		strings.Join(backends, ", "), redirect, proxy, id, f.Status.Kind.String(), f.TopologyLevel,
	}
}
