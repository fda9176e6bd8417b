package main

import (
	"encoding/json"
	"strings"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// redirectsCmd lists the frontends a local redirect policy redirects: a
// Service's frontends sent to the policy's pods, and the policies' own
// LocalRedirect addresses. Policies themselves are not in a table; the
// target service (namespace/policy:lrp) names the policy.
var redirectsCmd = remoteListCmd("redirects",
	"Usage: lbctl redirects [flags]\n\nLists a running agent's redirected frontends: where each goes (the policy's namespace/name:lrp) and its backends.",
	tables.FrontendsTableName, tables.FrontendByAddress.Name, tables.FrontendByAddress.FromKey(lb.L3n4Addr{}),
	func(r redirectRow) bool { return r.redirected() })

// redirectRow is a frontend as lbctl redirects prints it.
type redirectRow struct{ fe *lb.Frontend }

func (r redirectRow) redirected() bool {
	return r.fe != nil && (!r.fe.RedirectedTo.IsZero() || r.fe.Type == lb.SVCTypeLocalRedirect)
}

// target is the service whose backends the frontend uses, marked when
// the redirect leaves its backends' own traffic to the service's.
func (r redirectRow) target() string {
	if !r.fe.RedirectedTo.IsZero() {
		if r.fe.SkipFromBackend {
			return r.fe.RedirectedTo.String() + " (skip-from-backend)"
		}
		return r.fe.RedirectedTo.String()
	}
	return r.fe.Service.String()
}

func (redirectRow) TableHeader() []string {
	return []string{"Address", "Type", "Service", "RedirectedTo", "Backends"}
}

func (r redirectRow) TableRow() []string {
	backends := make([]string, len(r.fe.Backends))
	for i, b := range r.fe.Backends {
		backends[i] = b.Address.String()
	}
	return []string{r.fe.Address.String(), r.fe.Type.String(), r.fe.Service.String(), r.target(), strings.Join(backends, ", ")}
}

func (r redirectRow) MarshalJSON() ([]byte, error) { return json.Marshal(r.fe) }

func (r redirectRow) MarshalYAML() (any, error) { return r.fe, nil }

func (r *redirectRow) UnmarshalJSON(data []byte) error {
	r.fe = &lb.Frontend{}
	return json.Unmarshal(data, r.fe)
}
