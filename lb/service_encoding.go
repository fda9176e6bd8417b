package lb

import "encoding/json"

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
