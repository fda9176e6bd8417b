package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// simulate --k8s-node-name shows where each node of the manifests sends
// new flows under topology keys: testdata/topology has four Nodes in three
// files, and shop/db (hostname, zone, region; strict) has backends on
// node-a and node-b.
func TestSimulateTopologyKeysForEachNode(t *testing.T) {
	for node, want := range map[string]string{
		"node-a": "kubernetes.io/hostname: 10.0.1.30:5432/TCP=100 10.0.2.30:5432/TCP=0",
		"node-b": "kubernetes.io/hostname: 10.0.2.30:5432/TCP=100 10.0.1.30:5432/TCP=0",
		"node-c": "(none): 10.0.1.30:5432/TCP=0 10.0.2.30:5432/TCP=0",
		"node-d": "topology.kubernetes.io/region: 10.0.1.30:5432/TCP=100 10.0.2.30:5432/TCP=100",
	} {
		var views []frontendView
		if err := json.Unmarshal([]byte(lbctl(t, "simulate", "-f", "testdata/topology", "--k8s-node-name", node, "-o", "json")), &views); err != nil {
			t.Fatal(err)
		}
		if len(views) != 1 {
			t.Fatalf("%s: %d frontends, want 1", node, len(views))
		}
		got := views[0].Topology + ":"
		for _, b := range views[0].Backends {
			got += fmt.Sprintf(" %s=%d", b.Address, b.Weight)
		}
		if got != want {
			t.Errorf("%s: %s, want %s", node, got, want)
		}
	}
	table := lbctl(t, "simulate", "-f", "testdata/topology", "--k8s-node-name", "node-c")
	if !strings.Contains(table, "TOPOLOGY") || !strings.Contains(table, "(none)") {
		t.Errorf("no TOPOLOGY column:\n%s", table)
	}
}
