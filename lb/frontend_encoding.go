package lb

import (
	"encoding/json"

	"github.com/cilium/statedb/reconciler"
)

// frontendRow is a Frontend as it is encoded (JSON for StateDB's HTTP API
// and lbctl, YAML for db/show): every field, FrontendExtras included, in
// the order the row had them when they were all its own.
type frontendRow struct {
	// FrontendParams' fields, listed here: embedded, its MarshalJSON
	// would be promoted and encode the row as a FrontendParams.
	Address  L3n4Addr `json:"address" yaml:"address"`
	Type     SVCType  `json:"type" yaml:"type"`
	PortName string   `json:"portName,omitempty" yaml:"portName,omitempty"`
	Claim    Claim    `json:"claim,omitempty" yaml:"claim,omitempty"`

	Service         ServiceName       `json:"service" yaml:"service"`
	Policy          *ServiceParams    `json:"policy" yaml:"policy"`
	RedirectedTo    ServiceName       `json:"redirectedTo,omitzero" yaml:"redirectedTo,omitempty"`
	SkipFromBackend bool              `json:"skipFromBackend,omitempty" yaml:"skipFromBackend,omitempty"`
	RoutedBy        string            `json:"routedBy,omitempty" yaml:"routedBy,omitempty"`
	ProxyPort       uint16            `json:"proxyPort,omitempty" yaml:"proxyPort,omitempty"`
	Backends        []BackendRef      `json:"backends" yaml:"backends"`
	Rejected        uint16            `json:"rejected,omitempty" yaml:"rejected,omitempty"`
	Hidden          []BackendRef      `json:"hidden,omitempty" yaml:"hidden,omitempty"`
	TopologyLevel   string            `json:"topologyLevel,omitempty" yaml:"topologyLevel,omitempty"`
	ID              uint32            `json:"id,omitempty" yaml:"id,omitempty"`
	Status          reconciler.Status `json:"status" yaml:"status"`
}

// MarshalJSON encodes the frontend with its service's policy but not the
// service's frontend list (Policy.Frontends), so that a row's encoding is
// proportional to the row: every frontend of a service shares that list,
// and embedding it made a table dump grow with the square of a service's
// ports (10,000 ports: 7 GB).
func (f Frontend) MarshalJSON() ([]byte, error) { return json.Marshal(f.row()) }

// MarshalYAML encodes the frontend as MarshalJSON does.
func (f Frontend) MarshalYAML() (any, error) { return f.row(), nil }

func (f *Frontend) row() *frontendRow {
	x := f.x()
	r := &frontendRow{
		Address: f.Address, Type: f.Type, PortName: f.PortName, Claim: f.Claim, Service: f.Service, Policy: f.Policy,
		RedirectedTo: x.RedirectedTo, SkipFromBackend: x.SkipFromBackend, RoutedBy: x.RoutedBy,
		ProxyPort: x.ProxyPort, Backends: f.Backends, Rejected: x.Rejected, Hidden: x.Hidden,
		TopologyLevel: x.TopologyLevel, ID: f.ID, Status: f.Status,
	}
	if f.Policy != nil && len(f.Policy.Frontends) > 0 {
		p := *f.Policy // shallow: only the slice header is dropped
		p.Frontends = nil
		r.Policy = &p
	}
	return r
}

func (f *Frontend) setRow(r *frontendRow) {
	fp := FrontendParams{Address: r.Address, Type: r.Type, Claim: r.Claim, PortName: r.PortName}
	*f = Frontend{FrontendParams: fp, Service: r.Service, Policy: r.Policy, ID: r.ID, Status: r.Status}
	f.SetBackends(r.Backends)
	f.SetExtras(FrontendExtras{
		RedirectedTo: r.RedirectedTo, SkipFromBackend: r.SkipFromBackend, RoutedBy: r.RoutedBy,
		ProxyPort: r.ProxyPort, Rejected: r.Rejected, Hidden: r.Hidden, TopologyLevel: r.TopologyLevel,
	})
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (f *Frontend) UnmarshalJSON(data []byte) error {
	var r frontendRow
	if err := json.Unmarshal(data, &r); err != nil {
		return err
	}
	f.setRow(&r)
	return nil
}

// UnmarshalYAML decodes what MarshalYAML encodes (the yaml packages'
// function-style interface, which needs no import of one).
func (f *Frontend) UnmarshalYAML(unmarshal func(any) error) error {
	var r frontendRow
	if err := unmarshal(&r); err != nil {
		return err
	}
	f.setRow(&r)
	return nil
}

// backendRefRow is a BackendRef as it is encoded: its fields in the order
// they were declared before BackendRef was packed, the zone by name.
type backendRefRow struct {
	Address   L3n4Addr     `json:"address" yaml:"address"`
	Weight    uint16       `json:"weight" yaml:"weight"`
	State     BackendState `json:"state" yaml:"state"`
	ClusterID uint32       `json:"clusterID,omitempty" yaml:"clusterID,omitempty"`
	Zone      string       `json:"zone,omitempty" yaml:"zone,omitempty"`
}

func (r BackendRef) row() backendRefRow {
	return backendRefRow{r.Address, r.Weight, r.State, r.ClusterID, r.Zone.String()}
}

func (r *backendRefRow) ref() BackendRef {
	return BackendRef{Address: r.Address, Weight: r.Weight, State: r.State, ClusterID: r.ClusterID, Zone: ZoneOf(r.Zone)}
}

func (r BackendRef) MarshalJSON() ([]byte, error) { return json.Marshal(r.row()) }
func (r BackendRef) MarshalYAML() (any, error)    { return r.row(), nil }

// UnmarshalJSON decodes what MarshalJSON encodes.
func (r *BackendRef) UnmarshalJSON(b []byte) error {
	var row backendRefRow
	if err := json.Unmarshal(b, &row); err != nil {
		return err
	}
	*r = row.ref()
	return nil
}

// UnmarshalYAML decodes what MarshalYAML encodes.
func (r *BackendRef) UnmarshalYAML(unmarshal func(any) error) error {
	var row backendRefRow
	if err := unmarshal(&row); err != nil {
		return err
	}
	*r = row.ref()
	return nil
}
