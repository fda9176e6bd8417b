package lb_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/lbstate/lbstate/lb"
)

// A backend row encodes its health details as fields of their own, as it
// did when they were fields of the row, and decodes back to itself.
func TestBackendEncodingKeepsHealthDetails(t *testing.T) {
	addr := lb.MustParseL3n4Addr("10.0.0.1:80/TCP")
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	plain := (&lb.Backend{Address: addr}).WithInstance(lb.BackendInstance{
		Service: lb.NewServiceName("ns", "svc"), Source: lb.SourceK8s,
		Params: lb.BackendParams{Address: addr, Weight: lb.DefaultBackendWeight}})
	checked := plain.WithVerdict(lb.HealthVerdict{Healthy: false, Since: since, LastError: "down"})

	j, err := json.Marshal(checked)
	if err != nil {
		t.Fatal(err)
	}
	const want = `"unhealthy":true,"healthSince":"2026-01-02T03:04:05Z","healthError":"down"}`
	if !strings.HasSuffix(string(j), want) {
		t.Errorf("JSON %s, want it to end with %s", j, want)
	}
	if j, _ := json.Marshal(plain); strings.Contains(string(j), "health") {
		t.Errorf("JSON of an unchecked backend %s has health fields", j)
	}
	var back lb.Backend
	if err := json.Unmarshal(j, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Verdict(), checked.Verdict()) || back.Address != addr || len(back.Instances) != 1 {
		t.Errorf("decoded %+v, want %+v", back, checked)
	}

	y, err := yaml.Marshal(checked)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(y), "healthError: down") || !strings.Contains(string(y), "healthSince: 2026-01-02T03:04:05Z") {
		t.Errorf("YAML %s lacks the health details", y)
	}
	var backY lb.Backend
	if err := yaml.Unmarshal(y, &backY); err != nil {
		t.Fatal(err)
	}
	if !backY.Verdict().Equal(checked.Verdict()) || backY.Instances[0].Service != checked.Instances[0].Service {
		t.Errorf("decoded from YAML %+v, want %+v", backY, checked)
	}
}

// A backend's parameters encode their fields in the order they are
// declared in (the struct is packed in another order), and decode back.
func TestBackendParamsEncodingKeepsFieldOrder(t *testing.T) {
	p := lb.BackendParams{Address: lb.MustParseL3n4Addr("10.0.0.1:80/TCP"), Weight: 7,
		NodeName: "n1", Zone: "z1", ClusterID: 3, State: lb.BackendTerminating}.
		WithPortNames("http").WithTopologyHints([]string{"z1"}, []string{"n1"})
	j, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"address":"10.0.0.1:80/TCP","portNames":["http"],"weight":7,"nodeName":"n1","zone":"z1","forZones":["z1"],"forNodes":["n1"],"clusterID":3,"state":"terminating"}`
	if string(j) != want {
		t.Errorf("JSON\n%s\nwant\n%s", j, want)
	}
	var back lb.BackendParams
	if err := json.Unmarshal(j, &back); err != nil || !back.Equal(&p) {
		t.Errorf("decoded %+v (%v), want %+v", back, err, p)
	}
	y, err := yaml.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	const wantY = "address: 10.0.0.1:80/TCP\nportNames:\n    - http\nweight: 7\nnodeName: n1\nzone: z1\nforZones:\n    - z1\nforNodes:\n    - n1\nclusterID: 3\nstate: terminating\n"
	if string(y) != wantY {
		t.Errorf("YAML\n%s\nwant\n%s", y, wantY)
	}
	var backY lb.BackendParams
	if err := yaml.Unmarshal(y, &backY); err != nil || !backY.Equal(&p) {
		t.Errorf("decoded from YAML %+v (%v), want %+v", backY, err, p)
	}
}
