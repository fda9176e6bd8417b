package k8s

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/tables"
)

// serviceWith is a LoadBalancer Service with two ports and an ingress IP,
// with spec and metadata lines added.
func serviceWith(meta, spec, status string) string {
	return `
metadata:
  name: web
  namespace: default
` + meta + `
spec:
  type: LoadBalancer
  clusterIP: 10.96.0.1
  ports: [{name: http, port: 80, nodePort: 30080}, {name: dns, port: 53, protocol: UDP, nodePort: 30053}]
` + spec + `
status:
  loadBalancer:
    ingress: [{ip: 192.0.2.1` + status + `}]
`
}

// A value of an evolving field that this version does not know means the
// field's default, as the API asks of older implementations: the Service
// converts exactly as with the default spelled out, and the value is
// reported apart from errors. (Such a Service was once rejected whole, so
// a cluster upgrade that added a value broke it.)
func TestUnknownValuesOfEvolvingFieldsMeanTheDefault(t *testing.T) {
	for _, tc := range []struct {
		field             string
		unknown, defaults string // the Service with the unknown value, and with the default
		value             string
	}{
		{"spec.trafficDistribution",
			serviceWith("", "  trafficDistribution: PreferSameRegion", ""), serviceWith("", "", ""), "PreferSameRegion"},
		{"spec.externalTrafficPolicy",
			serviceWith("", "  externalTrafficPolicy: Zonal", ""), serviceWith("", "  externalTrafficPolicy: Cluster", ""), "Zonal"},
		{"spec.internalTrafficPolicy",
			serviceWith("", "  internalTrafficPolicy: Zonal", ""), serviceWith("", "  internalTrafficPolicy: Cluster", ""), "Zonal"},
		{"spec.sessionAffinity",
			serviceWith("", "  sessionAffinity: Cookie", ""), serviceWith("", "  sessionAffinity: None", ""), "Cookie"},
		{"status.loadBalancer.ingress[0].ipMode",
			serviceWith("", "", ", ipMode: Tunnel"), serviceWith("", "", ", ipMode: VIP"), "Tunnel"},
		{"annotation lbstate.io/algorithm",
			serviceWith("  annotations: {lbstate.io/algorithm: least-conn}", "", ""), serviceWith("", "", ""), "least-conn"},
		{"annotation service.kubernetes.io/topology-mode",
			serviceWith("  annotations: {service.kubernetes.io/topology-mode: PreferZone}", "", ""),
			serviceWith("  annotations: {service.kubernetes.io/topology-mode: Disabled}", "", ""), "PreferZone"},
		{"annotation service.cilium.io/affinity",
			serviceWith("  annotations: {service.cilium.io/global: \"true\", service.cilium.io/affinity: nearest}", "", ""),
			serviceWith("  annotations: {service.cilium.io/global: \"true\"}", "", ""), "nearest"},
		{"spec.type",
			strings.Replace(serviceWith("", "", ""), "type: LoadBalancer", "type: DirectRouted", 1),
			strings.Replace(serviceWith("", "", ""), "type: LoadBalancer", "type: ClusterIP", 1), "DirectRouted"},
		{"spec.ports[1].protocol", // the port is left out, the others served
			strings.Replace(serviceWith("", "", ""), "protocol: UDP", "protocol: QUIC", 1),
			strings.Replace(serviceWith("", "", ""), ", {name: dns, port: 53, protocol: UDP, nodePort: 30053}", "", 1), "QUIC"},
	} {
		t.Run(tc.field, func(t *testing.T) {
			opts := ServiceOptions{Node: testNode}
			got, ok, unknown, err := ConvertService(decodeService(t, tc.unknown), opts)
			if err != nil || !ok {
				t.Fatalf("ok=%v err=%v: the Service was dropped", ok, err)
			}
			want, _, none, err := ConvertService(decodeService(t, tc.defaults), opts)
			if err != nil || len(none) > 0 {
				t.Fatalf("with the default: %v %v", none, err)
			}
			if !got.Equal(&want) {
				t.Errorf("converted unlike the default:\n  got  %+v\n  want %+v", got, want)
			}
			if len(unknown) != 1 {
				t.Fatalf("unknown values %+v, want one for %s", unknown, tc.field)
			}
			wantUnknown := []UnknownValue{{Object: "service default/web", Field: tc.field, Value: tc.value, Default: unknown[0].Default}}
			if !slices.Equal(unknown, wantUnknown) || unknown[0].Default == "" {
				t.Errorf("unknown values %+v, want %+v with what was used instead", unknown, wantUnknown)
			}
		})
	}
}

// Every value Kubernetes defines is known: none is reported.
func TestKnownValuesAreNotReported(t *testing.T) {
	for _, y := range []string{
		serviceWith("", "  trafficDistribution: PreferClose", ""),
		serviceWith("", "  trafficDistribution: PreferSameZone", ""),
		serviceWith("", "  trafficDistribution: PreferSameNode", ""),
		serviceWith("", "  externalTrafficPolicy: Local\n  internalTrafficPolicy: Local", ""),
		serviceWith("", "  sessionAffinity: ClientIP", ", ipMode: Proxy"),
		serviceWith("  annotations: {service.kubernetes.io/topology-mode: auto, lbstate.io/algorithm: maglev}", "", ""),
		serviceWith("  annotations: {service.kubernetes.io/topology-aware-hints: disabled, lbstate.io/algorithm: random}", "", ""),
		serviceWith("  annotations: {service.cilium.io/global: \"true\", service.cilium.io/affinity: Remote}", "", ""),
		strings.Replace(serviceWith("", "", ""), "protocol: UDP", "protocol: SCTP", 1),
		strings.Replace(serviceWith("", "", ""), "type: LoadBalancer", "type: NodePort", 1),
	} {
		if _, ok, unknown, err := ConvertService(decodeService(t, y), ServiceOptions{Node: testNode}); !ok || err != nil || len(unknown) > 0 {
			t.Errorf("%s\n  ok=%v unknown=%v err=%v", y, ok, unknown, err)
		}
	}
}

func TestUnknownValueError(t *testing.T) {
	u := UnknownValue{Object: "service default/web", Field: "spec.trafficDistribution", Value: "PreferSameRegion", Default: "no preference"}
	want := `service default/web: spec.trafficDistribution: unknown value "PreferSameRegion", using no preference`
	if u.Error() != want {
		t.Errorf("%q, want %q", u.Error(), want)
	}
}

// An EndpointSlice port of a protocol we do not know is left out, the
// rest of the slice kept (its Service's port reports the value).
func TestSlicePortOfUnknownProtocolLeftOut(t *testing.T) {
	_, bs, errs, err := ConvertEndpointSlice(decodeSlice(t, `
metadata: {name: s, namespace: default, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: quic, port: 443, protocol: QUIC}, {name: http, port: 80}]
endpoints: [{addresses: [10.0.0.1]}]
`))
	if err != nil || len(errs) > 0 {
		t.Fatal(err, errs)
	}
	if got := backendStrings(bs); !slices.Equal(got, []string{"10.0.0.1:80/TCP  ports=http"}) {
		t.Errorf("backends %q", got)
	}
}

// The Kubernetes source logs each unknown value once per Service at
// INFO, declares the Service, and counts no error; a change of the node,
// which converts every Service again, logs nothing new.
func TestUnknownValuesLoggedOncePerService(t *testing.T) {
	var logs bytes.Buffer
	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	src, err := reflectors.NewSource(w, lb.SourceK8s, slog.New(slog.NewTextHandler(&logs, nil)), reg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig
	cfg = cfg.WithNode("node-1")
	r, err := NewReflector(cfg, src, lb.SourceK8s)
	if err != nil {
		t.Fatal(err)
	}
	svc := decodeService(t, serviceWith("", "  trafficDistribution: PreferSameRegion", ""))
	node := &corev1.Node{}
	node.Name = "node-1"
	r.apply([]event{{obj: svc}})
	r.apply([]event{{obj: svc.DeepCopy()}, {obj: node}})
	if n := strings.Count(logs.String(), "Unknown value"); n != 1 {
		t.Errorf("%d log lines, want 1:\n%s", n, logs.String())
	}
	for _, s := range []string{"level=INFO", `object="service default/web"`, "field=spec.trafficDistribution", "value=PreferSameRegion", `default="no preference"`} {
		if !strings.Contains(logs.String(), s) {
			t.Errorf("log %q lacks %s", logs.String(), s)
		}
	}
	if _, _, found := w.Frontends().Get(db.ReadTxn(), tables.FrontendByAddress.Query(lb.MustParseL3n4Addr("10.96.0.1:80/TCP"))); !found || src.Errors() != 0 {
		t.Errorf("frontend found=%v, %d errors: the Service was not declared", found, src.Errors())
	}

	// Another unknown value: one more line, for it alone.
	changed := decodeService(t, serviceWith("", "  trafficDistribution: PreferSameRegion\n  sessionAffinity: Cookie", ""))
	r.apply([]event{{obj: changed}})
	if n := strings.Count(logs.String(), "Unknown value"); n != 2 || !strings.Contains(logs.String(), "value=Cookie") {
		t.Errorf("after a second unknown value: %d log lines, want 2:\n%s", n, logs.String())
	}
	// Counted as logged: each once.
	if n, err := testutil.GatherAndCount(reg, "lbstate_source_unknown_values_total"); err != nil || n != 1 {
		t.Fatalf("unknown values metric: %d series, %v", n, err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP lbstate_source_unknown_values_total Values of evolving fields a source did not know and replaced by the field's default
# TYPE lbstate_source_unknown_values_total counter
lbstate_source_unknown_values_total{source="k8s"} 2
`), "lbstate_source_unknown_values_total"); err != nil {
		t.Error(err)
	}
}
