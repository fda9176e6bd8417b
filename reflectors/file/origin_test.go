package file

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const semanticErrorsYAML = `apiVersion: v1
kind: Service
metadata: {name: good}
spec: {clusterIP: 10.96.0.1, ports: [{port: 80}]}
---
# a port out of range: decodes, and only the conversion knows
apiVersion: v1
kind: Service
metadata: {name: bad-port}
spec: {clusterIP: 10.96.0.2, ports: [{port: 70000}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: heavy}
spec:
  parentRefs: [{group: "", kind: Service, name: good}]
  rules: [{backendRefs: [{name: good, port: 80, weight: 1000001}]}]
---
apiVersion: cilium.io/v2
kind: CiliumLocalRedirectPolicy
metadata: {name: portless}
spec:
  redirectFrontend:
    serviceMatcher: {serviceName: good}
  redirectBackend:
    localEndpointSelector: {matchLabels: {app: dns}}
    toPorts: [{port: "0", protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: good-1
  labels: {kubernetes.io/service-name: good}
  annotations: {lbstate.io/weight: "heavy"}
addressType: IPv4
ports: [{port: 8080}]
endpoints: [{addresses: [10.0.0.1]}]
`

// The errors the sources find in an object that decoded (a Service's port
// out of range, a route's weight, a redirect policy's port, an
// EndpointSlice's weight annotation) name the file and the line where the
// object's document starts, as syntax errors name theirs: they once named
// only the object.
func TestSemanticErrorsFromAManifestNameFileAndLine(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "objects.yaml")
	write(t, path, semanticErrorsYAML)
	var logs syncBuffer
	startSource(t, dir, slog.New(slog.NewTextHandler(&logs, nil)))

	want := []string{
		path + ":7: service default/bad-port: spec.ports[0].port: 70000 is not a port",
		path + ":12: HTTPRoute default/heavy: spec.rules[0].backendRefs[0].weight: 1000001 is outside 0-1000000",
		path + ":19: policy default/portless: spec.redirectBackend.toPorts[0].port: ",
		path + ":29: endpointslice default/good-1: annotation lbstate.io/weight:",
	}
	// Each error is logged by the part that found it (the source, the
	// routes and the redirect policies' controllers): wait for the log to
	// name them all, not for one counter.
	missing := func() []string {
		got := logs.String()
		var out []string
		for _, w := range want {
			if !strings.Contains(got, w) {
				out = append(out, w)
			}
		}
		return out
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(missing()) > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	for _, w := range missing() {
		t.Errorf("no error %q in the log:\n%s", w, logs.String())
	}
}

// syncBuffer is a bytes.Buffer a logger may write from any goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
