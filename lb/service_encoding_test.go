package lb_test

import (
	"encoding/json"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

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

// A declaration and its frontends encode their fields in the order they are declared in (the
// struct is packed in another order), and decodes back to itself.
func TestServiceParamsEncodingKeepsFieldOrder(t *testing.T) {
	p := lb.ServiceParams{
		Name: lb.NewServiceName("ns", "svc"), Source: lb.SourceK8s,
		Frontends: []lb.FrontendParams{{Address: lb.MustParseL3n4Addr("10.96.0.1:80/TCP"), Type: lb.SVCTypeClusterIP},
			{Address: lb.MustParseL3n4Addr("10.96.0.2:53/UDP"), Type: lb.SVCTypeNodePort, PortName: "dns", Claim: lb.ClaimNodeAddress}},
		ExtTrafficPolicy: lb.TrafficPolicyLocal, IntTrafficPolicy: lb.TrafficPolicyLocal,
		TopologyKeys: []string{"*"}, SessionAffinity: true, SessionAffinityTimeout: 30,
		SourceRanges: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, HealthCheckNodePort: 30000,
		Created:     time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Annotations: map[string]string{"a": "b"},
	}
	j, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"name":"ns/svc","source":"k8s","frontends":[{"address":"10.96.0.1:80/TCP","type":"ClusterIP"},` +
		`{"address":"10.96.0.2:53/UDP","type":"NodePort","portName":"dns","claim":"node-address"}],` +
		`"extTrafficPolicy":"Local","intTrafficPolicy":"Local","topologyKeys":["*"],"sessionAffinity":true,` +
		`"sessionAffinityTimeout":30,"sourceRanges":["10.0.0.0/8"],"healthCheckNodePort":30000,` +
		`"created":"2026-01-02T03:04:05Z","annotations":{"a":"b"}}`
	if string(j) != want {
		t.Errorf("JSON\n%s\nwant\n%s", j, want)
	}
	var back lb.ServiceParams
	if err := json.Unmarshal(j, &back); err != nil || !back.Equal(&p) {
		t.Errorf("decoded %+v (%v), want %+v", back, err, p)
	}
	y, err := yaml.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var backY lb.ServiceParams
	if err := yaml.Unmarshal(y, &backY); err != nil || !backY.Equal(&p) {
		t.Errorf("decoded from YAML %+v (%v), want %+v\n%s", backY, err, p, y)
	}
	keys := regexp.MustCompile(`(?m)^[a-zA-Z]+:`).FindAllString(string(y), -1)
	wantKeys := []string{"name:", "source:", "frontends:", "extTrafficPolicy:", "intTrafficPolicy:", "topologyKeys:",
		"sessionAffinity:", "sessionAffinityTimeout:", "sourceRanges:", "healthCheckNodePort:", "created:", "annotations:"}
	if !slices.Equal(keys, wantKeys) {
		t.Errorf("YAML keys %v, want %v", keys, wantKeys)
	}
}
