package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const headerRouteYAML = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web-header, namespace: default, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  parentRefs: [{group: "", kind: Service, name: web}]
  rules:
  - matches: [{headers: [{name: x-canary, value: "true"}]}]
    backendRefs: [{name: web-canary, port: 80}]
`

// lbctl routes lists a running agent's routes: the canary example's
// route with its shares, and a header-matching route with what is not
// applied and why.
func TestRoutesListsSharesAndWhatIsNotApplied(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"services.yaml", "route.yaml"} {
		data, err := os.ReadFile(filepath.Join("../../examples/canary/manifests", f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "route.yaml" {
			data = []byte(strings.NewReplacer("weight: 100", "weight: 90", "weight: 0", "weight: 10").Replace(string(data)))
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "header.yaml"), []byte(headerRouteYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	api := serveAgent(t, explainPipeline(t, dir, "random"))
	got := lbctl(t, "routes", "--api", api)
	for _, want := range []string{
		"HTTPRoute default/web ", "default/web:80", "default/web-primary:80 90%, default/web-canary:80 10%",
		"HTTPRoute default/web-header", "spec.rules[0].matches[0].headers: cannot be decided per connection at L4",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("lbctl routes lacks %q:\n%s", want, got)
		}
	}
	if js := lbctl(t, "routes", "--api", api, "-o", "json"); !strings.Contains(js, `"percent": 90`) {
		t.Errorf("lbctl routes -o json lacks the 90%% share:\n%s", js)
	}
}
