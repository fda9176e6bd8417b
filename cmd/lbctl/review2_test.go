package main

// Regression tests from a review of the sources, the agent and lbctl.
// Each test's comment describes the bug it caught (fixed since).

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Flags after a stray positional argument are silently ignored: the
// output format asked for is not used and the command succeeds.
func TestReview2RemoteFlagsAfterPositional(t *testing.T) {
	api := agentAPI(t)
	var stdout, stderr bytes.Buffer
	code := run([]string{"frontends", "--api", api, "extra", "-o", "json"}, &stdout, &stderr)
	if code == 0 && !strings.HasPrefix(strings.TrimSpace(stdout.String()), "[") {
		t.Fatalf("exit 0 and not JSON output:\n%s", stdout.String())
	}
}

const review2StandbyOnly = `apiVersion: v1
kind: Service
metadata: {name: draining, namespace: default, annotations: {lbstate.io/algorithm: maglev}}
spec: {clusterIP: 10.96.2.1, ports: [{port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: draining-1
  labels: {kubernetes.io/service-name: draining}
  annotations: {lbstate.io/weight: "0"}
addressType: IPv4
ports: [{port: 8080}]
endpoints: [{addresses: [10.0.0.1]}]
---
apiVersion: v1
kind: Service
metadata: {name: v6, namespace: default}
spec:
  type: LoadBalancer
  allocateLoadBalancerNodePorts: false
  ipFamilies: [IPv6]
  clusterIP: fd00::10
  clusterIPs: [fd00::10]
  loadBalancerSourceRanges: [2001:db8::/32]
  ports: [{port: 443}]
status: {loadBalancer: {ingress: [{ip: "2001:db8:ff::9"}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: v6-1
  labels: {kubernetes.io/service-name: v6}
addressType: IPv6
ports: [{port: 8443}]
endpoints: [{addresses: ["fd00::1:5"]}]
`

// A Maglev frontend whose backends all take no new flows (weight 0): with
// --src, explain should not ask for --src.
func TestReview2ExplainMaglevNoNewFlows(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "m.yaml"), []byte(review2StandbyOnly), 0o644); err != nil {
		t.Fatal(err)
	}
	p := explainPipeline(t, dir, "random")
	out := explainText(t, p.maps, "10.96.2.1:80/TCP", "192.0.2.1:1234")
	t.Logf("\n%s", out)
	if strings.Contains(out, "give --src") {
		t.Fatalf("explain with --src still asks for --src:\n%s", out)
	}
}
