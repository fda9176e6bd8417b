package lb_test

import (
	"encoding/json"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/lbstate/lbstate/lb"
)

// A service row encodes its overrides and conflicts as fields of their
// own, in the order they had as fields of the row, and decodes back to
// itself.
func TestServiceEncodingKeepsOverrides(t *testing.T) {
	name := lb.NewServiceName("ns", "svc")
	addr := lb.MustParseL3n4Addr("10.96.0.1:80/TCP")
	svc := (&lb.Service{Name: name}).
		WithParams(lb.ServiceParams{Name: name, Source: lb.SourceK8s, Frontends: []lb.FrontendParams{{Address: addr, Type: lb.SVCTypeClusterIP}}}).
		WithRedirect(lb.Redirect{Source: lb.SourceRedirect, To: lb.NewServiceName("ns", "local")}).
		WithConflicts([]lb.FrontendConflict{{Address: addr, Owner: lb.NewServiceName("ns", "owner")}})

	j, err := json.Marshal(svc)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`{"name":"ns/svc","params":[`, `],"redirects":[{"source":"redirect","to":"ns/local"}],"conflicts":[{"address":"10.96.0.1:80/TCP","owner":"ns/owner"}]}`} {
		if !strings.Contains(string(j), want) {
			t.Errorf("JSON %s lacks %s", j, want)
		}
	}
	if j, _ := json.Marshal(&lb.Service{Name: name}); string(j) != `{"name":"ns/svc"}` {
		t.Errorf("JSON of a bare service %s", j)
	}
	var back lb.Service
	if err := json.Unmarshal(j, &back); err != nil {
		t.Fatal(err)
	}
	if back.Name != name || len(back.Params) != 1 || back.Redirect() == nil || back.Redirect().To != svc.Redirect().To ||
		len(back.Conflicts()) != 1 || back.Conflicts()[0] != svc.Conflicts()[0] || !back.Overridden() {
		t.Errorf("decoded %s, want %s", must(json.Marshal(&back)), j)
	}

	y, err := yaml.Marshal(svc)
	if err != nil {
		t.Fatal(err)
	}
	var backY lb.Service
	if err := yaml.Unmarshal(y, &backY); err != nil {
		t.Fatal(err)
	}
	if backY.Redirect() == nil || len(backY.Conflicts()) != 1 || !strings.Contains(string(y), "redirects:") {
		t.Errorf("YAML %s decoded to %s", y, must(json.Marshal(&backY)))
	}
}

func must(b []byte, err error) string {
	if err != nil {
		return err.Error()
	}
	return string(b)
}
