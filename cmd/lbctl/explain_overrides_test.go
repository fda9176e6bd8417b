package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const overrideManifests = `apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system}
spec:
  clusterIP: 10.96.0.10
  ports: [{name: dns, port: 53, protocol: UDP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: kube-dns-1, namespace: kube-system, labels: {kubernetes.io/service-name: kube-dns}}
addressType: IPv4
ports: [{name: dns, port: 53, protocol: UDP}]
endpoints: [{addresses: [10.0.2.10]}]
---
apiVersion: v1
kind: Pod
metadata: {name: node-local-dns-1, namespace: kube-system, labels: {k8s-app: node-local-dns}}
spec:
  nodeName: node-a
  containers: [{name: node-cache, image: node-cache, ports: [{name: dns, containerPort: 53, protocol: UDP}]}]
status:
  phase: Running
  podIPs: [{ip: 10.0.1.53}]
  conditions: [{type: Ready, status: "True"}]
---
apiVersion: cilium.io/v2
kind: CiliumLocalRedirectPolicy
metadata: {name: nodelocaldns, namespace: kube-system}
spec:
  redirectFrontend:
    serviceMatcher: {serviceName: kube-dns, namespace: kube-system}
  redirectBackend:
    localEndpointSelector: {matchLabels: {k8s-app: node-local-dns}}
    toPorts: [{port: "53", name: dns, protocol: UDP}]
  skipRedirectFromBackend: true
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: default
  annotations: {lbstate.io/proxy-port: "15001"}
spec: {clusterIP: 10.96.1.5, ports: [{port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{port: 8080}]
endpoints: [{addresses: [10.0.0.1]}]
`

// explain says where the overrides send a flow: to the L7 proxy, and, for
// a redirect with skip-from-backend, the redirect's backend's own flow to
// the service's own backends and anyone else's to the redirect's.
func TestExplainOverrides(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "svc.yaml"), []byte(overrideManifests), 0o644); err != nil {
		t.Fatal(err)
	}
	p := explainPipeline(t, dir, "random")
	for _, c := range []struct{ fe, src, want string }{
		{"10.96.1.5:80/TCP", "", "proxy: new flows go to the L7 proxy on this node, port 15001"},
		{"10.96.0.10:53/UDP", "10.0.1.53:40000", "skip-from-backend: 10.0.1.53 is the redirect's backend"},
		{"10.96.0.10:53/UDP", "10.0.1.53:40000", "10.0.2.10:53/UDP (active): 1 of 1 slots"},
		{"10.96.0.10:53/UDP", "10.0.5.5:40000", "skip-from-backend: 10.0.5.5 is none of the redirect's backends: redirected"},
		{"10.96.0.10:53/UDP", "10.0.5.5:40000", "10.0.1.53:53/UDP (active): 1 of 1 slots"},
	} {
		if out := explainText(t, p.maps, c.fe, c.src); !strings.Contains(out, c.want) {
			t.Errorf("%s from %q: want %q in:\n%s", c.fe, c.src, c.want, out)
		}
	}
}
