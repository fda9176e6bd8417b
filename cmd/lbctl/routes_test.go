package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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

// A route whose 10% backendRef names a Service that does not exist:
// lbctl routes shows the frontend's 10% rejected, simulate lists the
// reject slots with their share, and explain names them in the Maglev
// table and for a flow that lands on one.
func TestRoutesSimulateAndExplainShowTheRejectedShare(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile("../../examples/canary/manifests/services.yaml")
	if err != nil {
		t.Fatal(err)
	}
	route := strings.NewReplacer("weight: 100", "weight: 90", "name: web-canary, port: 80, weight: 0", "name: web-gone, port: 80, weight: 10")
	routeData, err := os.ReadFile("../../examples/canary/manifests/route.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for f, d := range map[string][]byte{"services.yaml": data, "route.yaml": []byte(route.Replace(string(routeData)))} {
		if err := os.WriteFile(filepath.Join(dir, f), d, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := explainPipeline(t, dir, "maglev")
	api := serveAgent(t, p)
	if got := lbctl(t, "routes", "--api", api); !strings.Contains(got, "default/web-gone:80 10%") || !strings.Contains(got, "10.96.10.1:80/TCP 10.0%") {
		t.Errorf("lbctl routes lacks the rejected 10%%:\n%s", got)
	}
	if js := lbctl(t, "routes", "--api", api, "-o", "json"); !strings.Contains(js, `"rejected"`) {
		t.Errorf("lbctl routes -o json lacks the rejected share:\n%s", js)
	}
	sim := lbctl(t, "simulate", "-f", dir, "--algorithm", "random")
	if !regexp.MustCompile(`reject\s+rejected\s+1\s+1\s+10\.0%`).MatchString(sim) {
		t.Errorf("lbctl simulate lacks the reject slot with 10%%:\n%s", sim)
	}
	out := explainText(t, p.maps, "10.96.10.1:80/TCP", "")
	if !regexp.MustCompile(`reject \(a route's share that does not resolve: new flows are refused\): 2[0-9] of 251 slots`).MatchString(out) {
		t.Errorf("explain lacks the Maglev table's reject elements (about 25 of 251):\n%s", out)
	}
	for port := 40000; ; port++ {
		out := explainText(t, p.maps, "10.96.10.1:80/TCP", fmt.Sprintf("192.0.2.77:%d", port))
		if strings.Contains(out, ": REJECTED") {
			break
		}
		if port == 40500 {
			t.Fatalf("no flow of 500 landed on a reject element:\n%s", out)
		}
	}
}
