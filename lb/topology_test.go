package lb_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/lbstate/lbstate/lb"
)

func TestParseTopologyKeys(t *testing.T) {
	seventeen := strings.Repeat("k,", 16) + "k17"
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{in: "kubernetes.io/hostname,topology.kubernetes.io/zone,*", want: []string{"kubernetes.io/hostname", "topology.kubernetes.io/zone", "*"}},
		{in: " a , b ", want: []string{"a", "b"}},
		{in: "*", want: []string{"*"}},
		{in: "", err: "empty list"},
		{in: "a,,b", err: "key 2: empty"},
		{in: "a, ", err: "key 2: empty"},
		{in: "*,a", err: `key 1: "*" must be the last key`},
		{in: "a,b,a", err: `key 3: "a" listed twice`},
		{in: "*,*", err: `key 1: "*" must be the last key`},
		{in: seventeen, err: "17 keys, at most 16 allowed"},
	} {
		got, err := lb.ParseTopologyKeys(tc.in)
		switch {
		case tc.err != "" && (err == nil || err.Error() != tc.err):
			t.Errorf("ParseTopologyKeys(%q): error %v, want %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || !slices.Equal(got, tc.want)):
			t.Errorf("ParseTopologyKeys(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestServiceParamsValidateNamesBadTopologyKeys(t *testing.T) {
	p := lb.ServiceParams{Name: lb.NewServiceName("default", "web"), Source: lb.SourceK8s, TopologyKeys: []string{"*", "zone"}}
	err := p.Validate()
	if err == nil || err.Error() != `service default/web: topologyKeys: key 1: "*" must be the last key` {
		t.Fatalf("Validate: %v", err)
	}
	p.TopologyKeys = []string{"zone", "*"}
	if err := p.Validate(); err != nil {
		t.Fatalf("Validate of good keys: %v", err)
	}
}

func TestServiceParamsEqualAndCloneCoverTopologyKeys(t *testing.T) {
	a := lb.ServiceParams{TopologyKeys: []string{"zone", "*"}}
	b := a.Clone()
	b.TopologyKeys[0] = "region"
	if a.TopologyKeys[0] != "zone" {
		t.Fatal("Clone shares TopologyKeys")
	}
	if a.Equal(&b) {
		t.Fatal("Equal ignores TopologyKeys")
	}
}
