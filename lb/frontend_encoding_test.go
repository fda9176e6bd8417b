package lb_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/lbstate/lbstate/lb"
)

// frontendOfLargeService returns one frontend of a service with n ports.
func frontendOfLargeService(n int) *lb.Frontend {
	p := &lb.ServiceParams{Name: lb.NewServiceName("default", "big"), Source: lb.SourceFile, SessionAffinity: true}
	for i := 1; i <= n; i++ {
		p.Frontends = append(p.Frontends, lb.FrontendParams{
			Address: lb.MustParseL3n4Addr(fmt.Sprintf("10.96.0.1:%d/TCP", i)), Type: lb.SVCTypeClusterIP, PortName: fmt.Sprintf("p%d", i)})
	}
	return &lb.Frontend{FrontendParams: p.Frontends[0], Service: p.Name, Policy: p,
		Backends: []lb.BackendRef{{Address: lb.MustParseL3n4Addr("10.0.0.1:80/TCP"), Weight: 100}}}
}

// A frontend encodes (JSON and YAML) to the same size whatever the size of
// its service, and decodes back to itself with its service's policy, less
// the service's frontend list, which the services table has.
func TestFrontendEncodingIsIndependentOfServiceSize(t *testing.T) {
	small, large := frontendOfLargeService(1), frontendOfLargeService(1000)
	for _, enc := range []struct {
		name    string
		marshal func(any) ([]byte, error)
	}{{"json", json.Marshal}, {"yaml", yaml.Marshal}} {
		a, err := enc.marshal(small)
		if err != nil {
			t.Fatal(err)
		}
		b, err := enc.marshal(large)
		if err != nil {
			t.Fatal(err)
		}
		if len(a) != len(b) {
			t.Errorf("%s: a frontend of a 1-port service is %d bytes, of a 1000-port service %d:\n%s", enc.name, len(a), len(b), b)
		}
	}

	data, err := json.Marshal(large)
	if err != nil {
		t.Fatal(err)
	}
	var back lb.Frontend
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	want := *large.Policy
	want.Frontends = nil
	if back.Address != large.Address || back.Service != large.Service || back.Policy == nil ||
		!back.Policy.Equal(&want) || len(back.Backends) != 1 {
		t.Fatalf("decoded %+v (policy %+v), want %+v (policy %+v)", back, back.Policy, large, want)
	}
	if len(large.Policy.Frontends) != 1000 {
		t.Fatal("encoding changed the shared policy")
	}
}
