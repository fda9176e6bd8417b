package lb

import (
	"encoding/json"
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

func (b *Backend) row() backendRow {
	return backendRow{b.Address, b.Instances, b.Unhealthy, b.HealthSince(), b.HealthError()}
}

func (b *Backend) setRow(r backendRow) {
	*b = Backend{Address: r.Address, Instances: r.Instances, Unhealthy: r.Unhealthy}
	if !r.HealthSince.IsZero() || r.HealthError != "" {
		b.health = &healthDetails{since: r.HealthSince, err: r.HealthError}
	}
}

func (b Backend) MarshalJSON() ([]byte, error) { return json.Marshal(b.row()) }
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
