package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// -topology loads services with topology keys, relabels nodes, and every
// relabel re-selects some frontends (a node's relabel that reached no
// frontend would time nothing).
func TestTopologyRelabelsReselectFrontends(t *testing.T) {
	var out bytes.Buffer
	if err := runTopology(options{services: 200, backends: 10, updates: 20, maps: "memory", json: true}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var res topologyResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("last line %q: %v", lines[len(lines)-1], err)
	}
	if res.Relabels != 20 || res.FrontendsPerRelabel < 1 { // the memory figure is a measurement, noisy in a shared test process
		t.Errorf("result %+v", res)
	}
}
