package lb_test

import (
	"encoding/json"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/lbstate/lbstate/lb"
)

// A zone is one handle per name, prints as its name, and a BackendRef
// encodes its zone by name, in the field order it had as a string (the
// zone last), and decodes back to the same handle.
func TestZoneIsOneHandleANameAndEncodesAsTheName(t *testing.T) {
	a, b := lb.ZoneOf("zone-a"), lb.ZoneOf("zone-b")
	if a == 0 || b == 0 || a == b || lb.ZoneOf("zone-a") != a || lb.ZoneOf("") != 0 {
		t.Fatalf("handles: zone-a %d, zone-b %d, zone-a again %d, none %d", a, b, lb.ZoneOf("zone-a"), lb.ZoneOf(""))
	}
	if a.String() != "zone-a" || lb.Zone(0).String() != "" || lb.Zone(65535).String() != "" {
		t.Fatalf("names: %q %q %q", a.String(), lb.Zone(0).String(), lb.Zone(65535).String())
	}
	ref := lb.BackendRef{Address: lb.MustParseL3n4Addr("10.0.0.1:80/TCP"), Weight: 100, ClusterID: 3, Zone: a}
	j, err := json.Marshal(ref)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"address":"10.0.0.1:80/TCP","weight":100,"state":"active","clusterID":3,"zone":"zone-a"}`; string(j) != want {
		t.Fatalf("JSON %s, want %s", j, want)
	}
	var back lb.BackendRef
	if err := json.Unmarshal(j, &back); err != nil || back != ref {
		t.Fatalf("JSON back: %+v %v, want %+v", back, err, ref)
	}
	y, err := yaml.Marshal([]lb.BackendRef{ref, {Address: ref.Address, Weight: 1}})
	if err != nil {
		t.Fatal(err)
	}
	want := "- address: 10.0.0.1:80/TCP\n  weight: 100\n  state: active\n  clusterID: 3\n  zone: zone-a\n" +
		"- address: 10.0.0.1:80/TCP\n  weight: 1\n  state: active\n"
	if string(y) != want {
		t.Fatalf("YAML\n%s\nwant\n%s", y, want)
	}
	var refs []lb.BackendRef
	if err := yaml.Unmarshal(y, &refs); err != nil || len(refs) != 2 || refs[0] != ref {
		t.Fatalf("YAML back: %+v %v", refs, err)
	}
}
