package lb

import "encoding/json"

// frontendRow is a Frontend as it is encoded (JSON for StateDB's HTTP API
// and lbctl, YAML for db/show): the same fields, without methods.
type frontendRow Frontend

// MarshalJSON encodes the frontend with its service's policy but not the
// service's frontend list (Policy.Frontends), so that a row's encoding is
// proportional to the row: every frontend of a service shares that list,
// and embedding it made a table dump grow with the square of a service's
// ports (10,000 ports: 7 GB).
func (f Frontend) MarshalJSON() ([]byte, error) { return json.Marshal(f.row()) }

// MarshalYAML encodes the frontend as MarshalJSON does.
func (f Frontend) MarshalYAML() (any, error) { return f.row(), nil }

func (f Frontend) row() *frontendRow {
	r := frontendRow(f)
	if f.Policy != nil && len(f.Policy.Frontends) > 0 {
		p := *f.Policy // shallow: only the slice header is dropped
		p.Frontends = nil
		r.Policy = &p
	}
	return &r
}
