package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// A remote cluster's backend shows its cluster ID in simulate's CLUSTER
// column (and JSON); this cluster's own show an empty one. Without remote
// backends there is no column.
func TestSimulateShowsEachBackendsCluster(t *testing.T) {
	views := []frontendView{{
		Frontend: "10.96.0.1:80/TCP", Type: "ClusterIP", Service: "shop/web", Algorithm: "random",
		Backends: []backendView{
			{Address: "10.0.0.1:8080/TCP", State: "active", Weight: 100, Slots: 1},
			{Address: "10.2.0.1:8080/TCP", State: "active", Weight: 100, Cluster: 2, Slots: 1},
		},
	}}
	var out bytes.Buffer
	printViews(&out, views)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "BACKEND            CLUSTER  STATE") {
		t.Fatalf("no CLUSTER column:\n%s", out.String())
	}
	if f := strings.Fields(lines[1]); f[len(f)-4] != "10.0.0.1:8080/TCP" {
		t.Errorf("this cluster's backend has a cluster: %q", lines[1])
	}
	if f := strings.Fields(lines[2]); f[0] != "10.2.0.1:8080/TCP" || f[1] != "2" {
		t.Errorf("the remote backend's row %q lacks cluster 2", lines[2])
	}
	js, _ := json.Marshal(views[0].Backends)
	if !strings.Contains(string(js), `"cluster":2`) || strings.Count(string(js), `"cluster"`) != 1 {
		t.Errorf("JSON %s: want cluster 2 on the remote backend only", js)
	}

	out.Reset()
	views[0].Backends = views[0].Backends[:1]
	printViews(&out, views)
	if strings.Contains(out.String(), "CLUSTER") {
		t.Errorf("a CLUSTER column without remote backends:\n%s", out.String())
	}
}

// explain names a remote backend's cluster.
func TestExplainShowsRemoteBackendsCluster(t *testing.T) {
	m, err := bpf.NewMemoryMaps(bpf.DefaultConfig, nil)
	if err != nil {
		t.Fatal(err)
	}
	fe := lb.MustParseL3n4Addr("10.96.0.1:80/TCP")
	local := lb.BackendRef{Address: lb.MustParseL3n4Addr("10.0.0.1:8080/TCP"), Weight: 100}
	remote := lb.BackendRef{Address: lb.MustParseL3n4Addr("10.2.0.1:8080/TCP"), Weight: 100, ClusterID: 2}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(m.Backends.Update(1, bpf.NewBackend(local, 0)))
	must(m.Backends.Update(2, bpf.NewBackend(remote, 0)))
	must(bpf.WriteService(m.Services, fe, bpf.ServiceValue{RevNatID: 1, ServiceMaster: bpf.ServiceMaster{Count: 2, Algorithm: bpf.AlgorithmRandom}}, []uint32{1, 2}))
	var out bytes.Buffer
	if err := explainFlow(&out, m, fe, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"backend 1 10.0.0.1:8080/TCP (active):", "backend 2 10.2.0.1:8080/TCP (active, cluster 2):"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("explain lacks %q:\n%s", want, out.String())
		}
	}
}
