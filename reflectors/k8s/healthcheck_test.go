package k8s

import (
	"maps"
	"testing"
)

// A Service's health-check and clustermesh annotations reach its
// declaration as they are, a value the health checker will reject
// included, and no other annotation does: one bad health-check value must
// not cost the Service its frontends.
func TestConvertServiceCarriesHealthCheckAndClustermeshAnnotationsOnly(t *testing.T) {
	p, ok, _, err := ConvertService(decodeService(t, `
metadata:
  name: web
  namespace: default
  annotations:
    lbstate.io/algorithm: maglev
    lbstate.io/health-check: http
    lbstate.io/health-check-path: /healthz
    lbstate.io/health-check-interval: often
    service.cilium.io/global: "true"
    service.cilium.io/shared: "false"
    service.cilium.io/affinity: local
    io.cilium/global-service: "true"
    io.cilium/shared-service: "true"
    io.cilium/service-affinity: remote
    service.cilium.io/lb-l7: enabled
    example.com/owner: team-a
spec: {clusterIP: 10.96.0.1, ports: [{port: 80}]}
`), ServiceOptions{})
	if err != nil || !ok {
		t.Fatalf("ok=%v err=%v", ok, err)
	}
	want := map[string]string{
		"lbstate.io/health-check":          "http",
		"lbstate.io/health-check-path":     "/healthz",
		"lbstate.io/health-check-interval": "often",
		"service.cilium.io/global":         "true",
		"service.cilium.io/shared":         "false",
		"service.cilium.io/affinity":       "local",
		"io.cilium/global-service":         "true",
		"io.cilium/shared-service":         "true",
		"io.cilium/service-affinity":       "remote",
	}
	if !maps.Equal(p.Annotations, want) {
		t.Errorf("annotations %v, want %v", p.Annotations, want)
	}
	if len(p.Frontends) != 1 {
		t.Errorf("frontends %v", p.Frontends)
	}

	p, _, _, _ = ConvertService(decodeService(t, `
metadata: {name: web, namespace: default, annotations: {example.com/owner: team-a}}
spec: {clusterIP: 10.96.0.1, ports: [{port: 80}]}
`), ServiceOptions{})
	if p.Annotations != nil {
		t.Errorf("a Service without health-check annotations carries %v", p.Annotations)
	}
}
