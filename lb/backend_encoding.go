package lb

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// backendRow is a Backend as it is encoded (JSON for StateDB's HTTP API
// and lbctl, YAML for db/show): the health details, which the row keeps
// behind a pointer, as fields of their own.
type backendRow struct {
	Address     L3n4Addr          `json:"address" yaml:"address"`
	Instances   []BackendInstance `json:"instances" yaml:"instances"`
	Unhealthy   bool              `json:"unhealthy,omitempty" yaml:"unhealthy,omitempty"`
	HealthSince time.Time         `json:"healthSince,omitzero" yaml:"healthSince,omitempty"`
	HealthError string            `json:"healthError,omitempty" yaml:"healthError,omitempty"`
}

// backendParamsRow is BackendParams as it is encoded, its fields in the
// order they were declared before BackendParams was packed.
type backendParamsRow struct {
	Address   L3n4Addr     `json:"address" yaml:"address"`
	PortNames []string     `json:"portNames,omitempty" yaml:"portNames,omitempty"`
	Weight    uint16       `json:"weight" yaml:"weight"`
	NodeName  string       `json:"nodeName,omitempty" yaml:"nodeName,omitempty"`
	Zone      string       `json:"zone,omitempty" yaml:"zone,omitempty"`
	ForZones  []string     `json:"forZones,omitempty" yaml:"forZones,omitempty"`
	ForNodes  []string     `json:"forNodes,omitempty" yaml:"forNodes,omitempty"`
	ClusterID uint32       `json:"clusterID,omitempty" yaml:"clusterID,omitempty"`
	State     BackendState `json:"state,omitempty" yaml:"state,omitempty"`
}

func (p *BackendParams) row() backendParamsRow {
	return backendParamsRow{p.Address, p.PortNames(), p.Weight, p.NodeName, p.Zone, p.ForZones(), p.ForNodes(), p.ClusterID, p.State}
}

func (r *backendParamsRow) params() BackendParams {
	return BackendParams{Address: r.Address, Weight: r.Weight, ClusterID: r.ClusterID, State: r.State,
		NodeName: r.NodeName, Zone: r.Zone, hints: makeBackendHints(r.PortNames, r.ForZones, r.ForNodes)}
}

func (p BackendParams) MarshalJSON() ([]byte, error) { return json.Marshal(p.row()) }
func (p BackendParams) MarshalYAML() (any, error)    { return p.row(), nil }

// UnmarshalJSON decodes a backend, defaulting a missing weight to
// DefaultBackendWeight. Unknown fields are errors, so that a misspelt
// field is not silently replaced by its default.
func (p *BackendParams) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		return nil // as encoding/json does: null leaves the value alone
	}
	type plain backendParamsRow // errors name the type as before
	r := plain{Weight: DefaultBackendWeight}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return fmt.Errorf("backend: %w", err)
	}
	*p = (*backendParamsRow)(&r).params()
	return nil
}

// UnmarshalYAML decodes what MarshalYAML encodes (a missing weight is 0,
// as before BackendParams had its own encoding).
func (p *BackendParams) UnmarshalYAML(unmarshal func(any) error) error {
	var r backendParamsRow
	if err := unmarshal(&r); err != nil {
		return err
	}
	*p = r.params()
	return nil
}

func (b *Backend) row() backendRow {
	return backendRow{b.Address, b.Instances, b.Unhealthy, b.HealthSince(), b.HealthError()}
}

func (b *Backend) setRow(r backendRow) {
	*b = Backend{Address: r.Address, Instances: r.Instances, Unhealthy: r.Unhealthy}
	if !r.HealthSince.IsZero() || r.HealthError != "" {
		b.health = &healthDetails{since: r.HealthSince, err: r.HealthError}
	}
}

func (b Backend) MarshalJSON() ([]byte, error) { return b.AppendJSON(make([]byte, 0, 256)), nil }
func (b Backend) MarshalYAML() (any, error)    { return b.row(), nil }

func (b *Backend) UnmarshalJSON(data []byte) error {
	var r backendRow
	if err := json.Unmarshal(data, &r); err != nil {
		return err
	}
	b.setRow(r)
	return nil
}

// UnmarshalYAML decodes what MarshalYAML encodes (the yaml packages'
// function-style interface, which needs no import of one).
func (b *Backend) UnmarshalYAML(unmarshal func(any) error) error {
	var r backendRow
	if err := unmarshal(&r); err != nil {
		return err
	}
	b.setRow(r)
	return nil
}
