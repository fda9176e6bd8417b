package lb

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"time"
)

// serviceRow is a Service as it is encoded (JSON for StateDB's HTTP API
// and lbctl, YAML for db/show): its overrides, which the row keeps behind
// a pointer, as fields of their own, in the order the row had them.
type serviceRow struct {
	Name           ServiceName        `json:"name" yaml:"name"`
	Params         []ServiceParams    `json:"params,omitempty" yaml:"params,omitempty"`
	Redirects      []Redirect         `json:"redirects,omitempty" yaml:"redirects,omitempty"`
	ProxyRedirects []ProxyRedirect    `json:"proxyRedirects,omitempty" yaml:"proxyRedirects,omitempty"`
	Routes         []Route            `json:"routes,omitempty" yaml:"routes,omitempty"`
	Conflicts      []FrontendConflict `json:"conflicts,omitempty" yaml:"conflicts,omitempty"`
}

// serviceParamsRow is ServiceParams as it is encoded, its fields in the
// order they were declared before ServiceParams was packed.
type serviceParamsRow struct {
	Name                   ServiceName         `json:"name" yaml:"name"`
	Source                 Source              `json:"source" yaml:"source"`
	Frontends              []FrontendParams    `json:"frontends,omitempty" yaml:"frontends,omitempty"`
	ExtTrafficPolicy       TrafficPolicy       `json:"extTrafficPolicy,omitempty" yaml:"extTrafficPolicy,omitempty"`
	IntTrafficPolicy       TrafficPolicy       `json:"intTrafficPolicy,omitempty" yaml:"intTrafficPolicy,omitempty"`
	TrafficDistribution    TrafficDistribution `json:"trafficDistribution,omitempty" yaml:"trafficDistribution,omitempty"`
	TopologyKeys           []string            `json:"topologyKeys,omitempty" yaml:"topologyKeys,omitempty"`
	SessionAffinity        bool                `json:"sessionAffinity,omitempty" yaml:"sessionAffinity,omitempty"`
	SessionAffinityTimeout uint32              `json:"sessionAffinityTimeout,omitempty" yaml:"sessionAffinityTimeout,omitempty"`
	SourceRanges           []netip.Prefix      `json:"sourceRanges,omitempty" yaml:"sourceRanges,omitempty"`
	Algorithm              Algorithm           `json:"algorithm,omitempty" yaml:"algorithm,omitempty"`
	HealthCheckNodePort    uint16              `json:"healthCheckNodePort,omitempty" yaml:"healthCheckNodePort,omitempty"`
	Created                time.Time           `json:"created,omitzero" yaml:"created,omitempty"`
	Annotations            map[string]string   `json:"annotations,omitempty" yaml:"annotations,omitempty"`
}

func (p *ServiceParams) row() serviceParamsRow {
	return serviceParamsRow{p.Name, p.Source, p.Frontends, p.ExtTrafficPolicy, p.IntTrafficPolicy,
		p.TrafficDistribution, p.TopologyKeys, p.SessionAffinity, p.SessionAffinityTimeout, p.SourceRanges,
		p.Algorithm, p.HealthCheckNodePort, p.Created, p.Annotations}
}

func (r *serviceParamsRow) params() ServiceParams {
	return ServiceParams{Name: r.Name, Frontends: r.Frontends, TopologyKeys: r.TopologyKeys,
		SourceRanges: r.SourceRanges, Created: r.Created, Annotations: r.Annotations,
		SessionAffinityTimeout: r.SessionAffinityTimeout, HealthCheckNodePort: r.HealthCheckNodePort,
		Source: r.Source, ExtTrafficPolicy: r.ExtTrafficPolicy, IntTrafficPolicy: r.IntTrafficPolicy,
		TrafficDistribution: r.TrafficDistribution, SessionAffinity: r.SessionAffinity, Algorithm: r.Algorithm}
}

func (p ServiceParams) MarshalJSON() ([]byte, error) { return json.Marshal(p.row()) }
func (p ServiceParams) MarshalYAML() (any, error)    { return p.row(), nil }

// UnmarshalJSON decodes what MarshalJSON encodes. Unknown fields are
// errors, as they are where declarations are read (a decoder's
// DisallowUnknownFields does not reach a type's own UnmarshalJSON).
func (p *ServiceParams) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == "null" {
		return nil // as encoding/json does: null leaves the value alone
	}
	type ServiceParams serviceParamsRow // errors name the type as before
	var r ServiceParams
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return err
	}
	*p = (*serviceParamsRow)(&r).params()
	return nil
}

// UnmarshalYAML decodes what MarshalYAML encodes.
func (p *ServiceParams) UnmarshalYAML(unmarshal func(any) error) error {
	var r serviceParamsRow
	if err := unmarshal(&r); err != nil {
		return err
	}
	*p = r.params()
	return nil
}

// frontendParamsRow is FrontendParams as it is encoded, its fields in the
// order they were declared before FrontendParams was packed.
type frontendParamsRow struct {
	Address  L3n4Addr `json:"address" yaml:"address"`
	Type     SVCType  `json:"type" yaml:"type"`
	PortName string   `json:"portName,omitempty" yaml:"portName,omitempty"`
	Claim    Claim    `json:"claim,omitempty" yaml:"claim,omitempty"`
}

func (f FrontendParams) MarshalJSON() ([]byte, error) {
	return json.Marshal(frontendParamsRow{f.Address, f.Type, f.PortName, f.Claim})
}

func (f FrontendParams) MarshalYAML() (any, error) {
	return frontendParamsRow{f.Address, f.Type, f.PortName, f.Claim}, nil
}

// UnmarshalJSON decodes what MarshalJSON encodes; unknown fields are
// errors (see ServiceParams.UnmarshalJSON).
func (f *FrontendParams) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == "null" {
		return nil
	}
	type FrontendParams frontendParamsRow // errors name the type as before
	var r FrontendParams
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return err
	}
	*f = fromFrontendParamsRow(frontendParamsRow(r))
	return nil
}

// UnmarshalYAML decodes what MarshalYAML encodes.
func (f *FrontendParams) UnmarshalYAML(unmarshal func(any) error) error {
	var r frontendParamsRow
	if err := unmarshal(&r); err != nil {
		return err
	}
	*f = fromFrontendParamsRow(r)
	return nil
}

func fromFrontendParamsRow(r frontendParamsRow) FrontendParams {
	return FrontendParams{Address: r.Address, Type: r.Type, Claim: r.Claim, PortName: r.PortName}
}

func (s *Service) row() serviceRow {
	o := s.over()
	return serviceRow{s.Name, s.Params, o.redirects, o.proxyRedirects, o.routes, o.conflicts}
}

func (s *Service) setRow(r serviceRow) {
	*s = Service{Name: r.Name, Params: r.Params}
	o := serviceOverrides{r.Redirects, r.ProxyRedirects, r.Routes, r.Conflicts}
	if !o.isZero() {
		s.overrides = &o
	}
}

func (s Service) MarshalJSON() ([]byte, error) { return json.Marshal(s.row()) }
func (s Service) MarshalYAML() (any, error)    { return s.row(), nil }

func (s *Service) UnmarshalJSON(data []byte) error {
	var r serviceRow
	if err := json.Unmarshal(data, &r); err != nil {
		return err
	}
	s.setRow(r)
	return nil
}

// UnmarshalYAML decodes what MarshalYAML encodes (the yaml packages'
// function-style interface, which needs no import of one).
func (s *Service) UnmarshalYAML(unmarshal func(any) error) error {
	var r serviceRow
	if err := unmarshal(&r); err != nil {
		return err
	}
	s.setRow(r)
	return nil
}
