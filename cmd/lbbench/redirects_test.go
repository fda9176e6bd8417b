package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// -redirects applies and removes the policies (runRedirects checks the
// backends map is back to the services' own) and times pod changes.
func TestRedirectsApplyRemoveAndTimePodChanges(t *testing.T) {
	var out bytes.Buffer
	if err := runRedirects(options{services: 300, redirects: 100, updates: 50, iterations: 2, maps: "memory", json: true}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var res redirectsResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("last line %q: %v", lines[len(lines)-1], err)
	}
	if res.Policies != 100 || res.PodChanges != 50 || res.ApplyMs.Min <= 0 || res.RemoveMs.Min <= 0 {
		t.Errorf("result %+v", res)
	}
}
