package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// -routes applies, shifts and times routes over loaded services.
func TestRoutesBenchAppliesAndShifts(t *testing.T) {
	var out bytes.Buffer
	if err := runRoutes(options{services: 300, backends: 2, routes: 100, updates: 20, maps: "memory", json: true}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var res routesResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("last line %q: %v", lines[len(lines)-1], err)
	}
	if res.Routes != 100 || res.Shifts != 20 || res.ApplyAllMs <= 0 {
		t.Errorf("result %+v", res)
	}
}
