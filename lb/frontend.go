package lb

import (
	"slices"
	"strconv"
	"strings"

	"github.com/cilium/statedb/reconciler"
)

// BackendRef is a backend as one frontend uses it: the result of backend
// selection, with everything the datapath needs.
//
// Its fields are ordered to pack into 32 bytes (Zone in the hole after
// State); encoded (JSON, YAML), they keep the order of backendRefRow.
type BackendRef struct {
	Address L3n4Addr

	// Weight is the effective weight. Backends kept only for the flows
	// they already carry (terminating while active ones exist, quarantined,
	// maintenance, not-ready) have weight 0.
	Weight uint16

	// State is the effective state: an unhealthy active backend shows as
	// quarantined.
	State     BackendState
	Zone      Zone
	ClusterID uint32
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
//
// The fields most frontends leave empty (FrontendExtras) sit behind one
// pointer, read with their accessors (RedirectedTo, Hidden, ...), and a
// frontend with one backend keeps it in the row: a row is one allocation.
// Encoded (JSON, YAML), a frontend has every field of its own.
type Frontend struct {
	FrontendParams

	Service ServiceName

	// Policy is the owning service's declaration in force. It is shared
	// with the services table and must not be modified. Encoded (JSON,
	// YAML), it leaves out the service's frontend list: the services
	// table has it.
	Policy *ServiceParams

	// Backends are the selected backends, the ones taking new flows (weight
	// above 0) first, each group sorted by address.
	Backends []BackendRef

	// ID is the frontend's ID in the datapath (its rev-NAT ID), set by the
	// reconciler; 0 until the frontend is first reconciled.
	ID uint32

	Status reconciler.Status

	extras     *FrontendExtras // nil when all are zero
	oneBackend [1]BackendRef   // Backends, when the Writer selected one
}

// FrontendExtras are the fields of a frontend that most frontends leave
// empty: what overrides its backends and how its topology was selected.
type FrontendExtras struct {
	// RedirectedTo names the service whose backends replace this
	// service's, when a redirect is set.
	RedirectedTo ServiceName

	// SkipFromBackend says that the redirect leaves the traffic of its own
	// backends (the clients that are one of Backends) to Hidden: the
	// redirect's SkipFromBackend.
	SkipFromBackend bool

	// RoutedBy names the route (Route.Name) whose split chose the
	// backends, when one is in force and no redirect is.
	RoutedBy string

	// ProxyPort, when not 0, sends new flows to the L7 proxy on this node
	// listening on this port; Backends stay for the proxy to use.
	ProxyPort uint16

	// Rejected is the weight, on the scale of Backends' weights, of the
	// share of new flows that the datapath rejects: a route's backend
	// services that do not resolve (missing, without the port, or without
	// a backend taking new flows) keep their share, as the Gateway API
	// requires, instead of handing it to the others. 0 for none.
	Rejected uint16

	// Hidden are, while a redirect or a route is in force, the backends
	// the frontend would have without it (selected as Backends are). The
	// reconciler keeps their IDs, so that clearing the override gives back
	// the maps as they were, and with SkipFromBackend writes them as the
	// fallback slots that the redirect's own backends are sent to.
	Hidden []BackendRef

	// TopologyLevel is, for a service with topology keys, the key whose
	// level was selected ("*" for the fallback to all), or
	// TopologyLevelNone when strict keys left no backend for new flows on
	// this node. Empty without topology keys.
	TopologyLevel string
}

// IsZero reports whether every field is empty.
func (e *FrontendExtras) IsZero() bool {
	return e.RedirectedTo.IsZero() && !e.SkipFromBackend && e.RoutedBy == "" && e.ProxyPort == 0 &&
		e.Rejected == 0 && len(e.Hidden) == 0 && e.TopologyLevel == ""
}

// Equal reports whether e and o say the same.
func (e *FrontendExtras) Equal(o *FrontendExtras) bool {
	return e.RedirectedTo == o.RedirectedTo && e.SkipFromBackend == o.SkipFromBackend &&
		e.RoutedBy == o.RoutedBy && e.ProxyPort == o.ProxyPort && e.Rejected == o.Rejected &&
		e.TopologyLevel == o.TopologyLevel && slices.Equal(e.Hidden, o.Hidden)
}

// Extras returns a copy of the frontend's FrontendExtras (zero when it has
// none); its slices are the row's and must not be modified.
func (f *Frontend) Extras() FrontendExtras { return *f.x() }

// HasExtrasEqual reports whether the frontend's FrontendExtras say what x
// says.
func (f *Frontend) HasExtrasEqual(x *FrontendExtras) bool { return f.x().Equal(x) }

var noExtras FrontendExtras

// x returns the frontend's extras, or a shared zero value, for reading
// within this package only.
func (f *Frontend) x() *FrontendExtras {
	if f.extras == nil {
		return &noExtras
	}
	return f.extras
}

// SetExtras sets the frontend's FrontendExtras, for building a row; the
// frontend keeps e's slices.
func (f *Frontend) SetExtras(e FrontendExtras) {
	if e.IsZero() {
		f.extras = nil
		return
	}
	x := new(FrontendExtras) // not &e: e would be moved to the heap on every call
	*x = e
	f.extras = x
}

// SetBackends sets Backends to refs, kept in the row itself when there
// is one (the frontend keeps a longer refs).
func (f *Frontend) SetBackends(refs []BackendRef) {
	if len(refs) == 1 {
		f.oneBackend[0] = refs[0]
		f.Backends = f.oneBackend[:]
		return
	}
	f.oneBackend[0] = BackendRef{}
	f.Backends = refs
}

// The accessors of FrontendExtras.
func (f *Frontend) RedirectedTo() ServiceName { return f.x().RedirectedTo }
func (f *Frontend) SkipFromBackend() bool     { return f.x().SkipFromBackend }
func (f *Frontend) RoutedBy() string          { return f.x().RoutedBy }
func (f *Frontend) ProxyPort() uint16         { return f.x().ProxyPort }
func (f *Frontend) Rejected() uint16          { return f.x().Rejected }
func (f *Frontend) Hidden() []BackendRef      { return f.x().Hidden }
func (f *Frontend) TopologyLevel() string     { return f.x().TopologyLevel }

// Clone returns a shallow copy (its one backend in its own row).
func (f *Frontend) Clone() *Frontend {
	c := *f
	if len(f.Backends) == 1 && &f.Backends[0] == &f.oneBackend[0] {
		c.Backends = c.oneBackend[:]
	}
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
	x := f.Extras()
	if x.Rejected > 0 {
		backends = append(backends, RejectString(x.Rejected))
	}
	redirect, proxy := "", ""
	if !x.RedirectedTo.IsZero() {
		redirect = x.RedirectedTo.String()
		if x.SkipFromBackend {
			redirect += " (skip-from-backend)"
		}
	} else if x.RoutedBy != "" {
		redirect = "route " + x.RoutedBy
	}
	if x.ProxyPort != 0 {
		proxy = strconv.Itoa(int(x.ProxyPort))
	}
	id := ""
	if f.ID != 0 {
		id = strconv.FormatUint(uint64(f.ID), 10)
	}
	return []string{
		f.Address.String(), f.Type.String(), f.Service.String(), f.PortName,
		strings.Join(backends, ", "), redirect, proxy, id, f.Status.Kind.String(), x.TopologyLevel,
	}
}
