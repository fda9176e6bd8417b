package k8s

import (
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/lbstate/lbstate/lb"
)

func decodeService(t testing.TB, y string) *corev1.Service {
	t.Helper()
	var svc corev1.Service
	if err := yaml.UnmarshalStrict([]byte(y), &svc); err != nil {
		t.Fatal(err)
	}
	return &svc
}

func decodeSlice(t testing.TB, y string) *discoveryv1.EndpointSlice {
	t.Helper()
	var es discoveryv1.EndpointSlice
	if err := yaml.UnmarshalStrict([]byte(y), &es); err != nil {
		t.Fatal(err)
	}
	return &es
}

func frontendStrings(p lb.ServiceParams) []string {
	out := make([]string, len(p.Frontends))
	for i, f := range p.Frontends {
		out[i] = f.Address.String() + " " + f.Type.String()
		if f.PortName != "" {
			out[i] += " " + f.PortName
		}
	}
	slices.Sort(out)
	return out
}

var testNode = lb.Node{Name: "n1", Zone: "z1", Addresses: []netip.Addr{netip.MustParseAddr("192.168.1.10"), netip.MustParseAddr("fd00:1::10")}}

func TestConvertServiceFrontends(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		opts ServiceOptions
		want []string
	}{
		{"ClusterIP, several ports and protocols", `
metadata: {name: web, namespace: default}
spec:
  clusterIP: 10.96.0.1
  ports:
  - {name: http, port: 80, targetPort: 8080}
  - {name: dns, port: 53, protocol: UDP}
  - {name: sig, port: 9000, protocol: SCTP, targetPort: sig}
`, ServiceOptions{}, []string{"10.96.0.1:53/UDP ClusterIP dns", "10.96.0.1:80/TCP ClusterIP http", "10.96.0.1:9000/SCTP ClusterIP sig"}},
		{"dual-stack", `
metadata: {name: web, namespace: default}
spec:
  clusterIP: 10.96.0.1
  clusterIPs: [10.96.0.1, "fd00::1"]
  ipFamilies: [IPv4, IPv6]
  ports: [{port: 80}]
`, ServiceOptions{}, []string{"10.96.0.1:80/TCP ClusterIP", "[fd00::1]:80/TCP ClusterIP"}},
		{"NodePort: node addresses and the node-wide form", `
metadata: {name: web, namespace: default}
spec:
  type: NodePort
  clusterIPs: [10.96.0.1, "fd00::1"]
  ports: [{name: http, port: 80, nodePort: 30080}]
`, ServiceOptions{Node: testNode}, []string{
			"0.0.0.0:30080/TCP NodePort http", "10.96.0.1:80/TCP ClusterIP http", "192.168.1.10:30080/TCP NodePort http",
			"[::]:30080/TCP NodePort http", "[fd00:1::10]:30080/TCP NodePort http", "[fd00::1]:80/TCP ClusterIP http"}},
		{"LoadBalancer with ingress IPs and node ports", `
metadata: {name: web, namespace: default}
spec:
  type: LoadBalancer
  clusterIP: 10.96.0.1
  ports: [{port: 443, nodePort: 30443}]
status:
  loadBalancer:
    ingress: [{ip: 192.0.2.1}, {hostname: lb.example.com}]
`, ServiceOptions{}, []string{"0.0.0.0:30443/TCP NodePort", "10.96.0.1:443/TCP ClusterIP", "192.0.2.1:443/TCP LoadBalancer"}},
		{"LoadBalancer of a class outside the filter, without node ports", `
metadata: {name: web, namespace: default}
spec:
  type: LoadBalancer
  loadBalancerClass: example.com/other
  allocateLoadBalancerNodePorts: false
  clusterIP: 10.96.0.1
  ports: [{port: 443}]
status:
  loadBalancer:
    ingress: [{ip: 192.0.2.1}]
`, ServiceOptions{LoadBalancerClasses: []string{"lbstate.io/lb"}}, []string{"10.96.0.1:443/TCP ClusterIP"}},
		{"LoadBalancer of any class, without a filter of classes", `
metadata: {name: web, namespace: default}
spec:
  type: LoadBalancer
  loadBalancerClass: example.com/other
  allocateLoadBalancerNodePorts: false
  clusterIP: 10.96.0.1
  ports: [{port: 443}]
status:
  loadBalancer:
    ingress: [{ip: 192.0.2.1}]
`, ServiceOptions{}, []string{"10.96.0.1:443/TCP ClusterIP", "192.0.2.1:443/TCP LoadBalancer"}},
		{"LoadBalancer without a class, with a filter of classes", `
metadata: {name: web, namespace: default}
spec:
  type: LoadBalancer
  allocateLoadBalancerNodePorts: false
  clusterIP: 10.96.0.1
  ports: [{port: 443}]
status:
  loadBalancer:
    ingress: [{ip: 192.0.2.1}]
`, ServiceOptions{LoadBalancerClasses: []string{"lbstate.io/lb"}}, []string{"10.96.0.1:443/TCP ClusterIP", "192.0.2.1:443/TCP LoadBalancer"}},
		{"LoadBalancer of a class in the filter", `
metadata: {name: web, namespace: default}
spec:
  type: LoadBalancer
  loadBalancerClass: lbstate.io/lb
  allocateLoadBalancerNodePorts: false
  clusterIP: 10.96.0.1
  ports: [{port: 443}]
status:
  loadBalancer:
    ingress: [{ip: 192.0.2.1}]
`, ServiceOptions{LoadBalancerClasses: []string{"lbstate.io/lb"}}, []string{"10.96.0.1:443/TCP ClusterIP", "192.0.2.1:443/TCP LoadBalancer"}},
		{"externalIPs", `
metadata: {name: web, namespace: default}
spec:
  clusterIP: 10.96.0.1
  externalIPs: [198.51.100.7]
  ports: [{port: 80}]
`, ServiceOptions{}, []string{"10.96.0.1:80/TCP ClusterIP", "198.51.100.7:80/TCP ExternalIP"}},
		{"externalTrafficPolicy Local: internal twins of external frontends", `
metadata: {name: web, namespace: default}
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  healthCheckNodePort: 32000
  clusterIP: 10.96.0.1
  ports: [{port: 80, nodePort: 30080}]
status:
  loadBalancer:
    ingress: [{ip: 192.0.2.1}]
`, ServiceOptions{}, []string{
			"0.0.0.0:30080/TCP NodePort", "0.0.0.0:30080/TCP/i NodePort", "10.96.0.1:80/TCP ClusterIP",
			"192.0.2.1:80/TCP LoadBalancer", "192.0.2.1:80/TCP/i LoadBalancer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, ok, unknown, err := ConvertService(decodeService(t, tc.yaml), tc.opts)
			if err != nil || !ok || len(unknown) > 0 {
				t.Fatalf("ok=%v unknown=%v err=%v", ok, unknown, err)
			}
			if got := frontendStrings(p); !slices.Equal(got, tc.want) {
				t.Errorf("frontends\n  got  %q\n  want %q", got, tc.want)
			}
			if p.Name != lb.NewServiceName("default", "web") || p.Source != lb.SourceK8s {
				t.Errorf("name %s source %s", p.Name, p.Source)
			}
		})
	}
}

func TestConvertServicePolicy(t *testing.T) {
	p, ok, unknown, err := ConvertService(decodeService(t, `
metadata:
  name: web
  namespace: default
  annotations: {lbstate.io/algorithm: maglev}
spec:
  type: LoadBalancer
  clusterIP: 10.96.0.1
  externalTrafficPolicy: Local
  internalTrafficPolicy: Local
  healthCheckNodePort: 32000
  trafficDistribution: PreferClose
  sessionAffinity: ClientIP
  sessionAffinityConfig: {clientIP: {timeoutSeconds: 600}}
  loadBalancerSourceRanges: [10.0.0.0/8, " 2001:db8::/32 "]
  ports: [{port: 80}]
`), ServiceOptions{})
	if err != nil || !ok || len(unknown) > 0 {
		t.Fatalf("ok=%v unknown=%v err=%v", ok, unknown, err)
	}
	want := lb.ServiceParams{
		ExtTrafficPolicy: lb.TrafficPolicyLocal, IntTrafficPolicy: lb.TrafficPolicyLocal,
		TrafficDistribution: lb.TrafficDistributionPreferSameZone, SessionAffinity: true, SessionAffinityTimeout: 600,
		SourceRanges: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")},
		Algorithm:    lb.AlgorithmMaglev, HealthCheckNodePort: 32000,
	}
	want.Name, want.Source, want.Frontends = p.Name, p.Source, p.Frontends
	if !p.Equal(&want) {
		t.Errorf("got %+v\nwant %+v", p, want)
	}

	// The topology-mode annotation and the affinity default.
	p, _, _, _ = ConvertService(decodeService(t, `
metadata:
  name: web
  namespace: default
  annotations: {service.kubernetes.io/topology-mode: Auto}
spec: {clusterIP: 10.96.0.1, sessionAffinity: ClientIP, ports: [{port: 80}]}
`), ServiceOptions{})
	if p.TrafficDistribution != lb.TrafficDistributionPreferSameZone || p.AffinityTimeout() != lb.DefaultAffinityTimeout {
		t.Errorf("topology-mode Auto / default affinity: %+v", p)
	}
}

func TestConvertServiceSkipped(t *testing.T) {
	for _, y := range []string{
		`{metadata: {name: db, namespace: default}, spec: {clusterIP: None, ports: [{port: 5432}]}}`,
		`{metadata: {name: ext, namespace: default}, spec: {type: ExternalName, externalName: example.com}}`,
	} {
		if p, ok, _, err := ConvertService(decodeService(t, y), ServiceOptions{}); ok || err != nil {
			t.Errorf("%s: ok=%v err=%v params=%+v, want skipped", y, ok, err, p)
		}
	}
}

// A headless Service that is global and shared is declared without
// frontends (the clustermesh exporter publishes its backends, as
// Cilium's does); one global but not shared is still skipped.
func TestConvertServiceDeclaresHeadlessSharedServicesWithoutFrontends(t *testing.T) {
	p, ok, _, err := ConvertService(decodeService(t, `{metadata: {name: db, namespace: default, annotations: {io.cilium/global-service: "true"}}, spec: {clusterIP: None, ports: [{port: 5432}]}}`), ServiceOptions{})
	if err != nil || !ok || len(p.Frontends) != 0 || !p.IsShared() || p.Name != lb.NewServiceName("default", "db") {
		t.Errorf("headless, global: ok=%v err=%v params=%+v", ok, err, p)
	}
	p, ok, _, err = ConvertService(decodeService(t, `{metadata: {name: db, namespace: default, annotations: {service.cilium.io/global: "true", service.cilium.io/shared: "false"}}, spec: {clusterIP: None, ports: [{port: 5432}]}}`), ServiceOptions{})
	if ok || err != nil {
		t.Errorf("headless, global, not shared: ok=%v err=%v params=%+v, want skipped", ok, err, p)
	}
}

func TestConvertServiceErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{`{metadata: {name: web, namespace: default}, spec: {clusterIP: 10.96.0.300, ports: [{port: 80}]}}`,
			"service default/web: spec.clusterIPs[0]: "},
		{`{metadata: {name: web, namespace: default}, spec: {clusterIP: 10.96.0.1, ports: [{port: 70000}]}}`,
			"service default/web: spec.ports[0].port: 70000 is not a port"},
		{`{metadata: {name: web, namespace: default}, spec: {clusterIP: 10.96.0.1, externalIPs: [nope], ports: [{port: 80}]}}`,
			"service default/web: spec.externalIPs[0]: "},
		{`{metadata: {name: web, namespace: default}, spec: {clusterIP: 10.96.0.1, loadBalancerSourceRanges: [10.0.0.0/33], ports: [{port: 80}]}}`,
			"service default/web: spec.loadBalancerSourceRanges[0]: "},
	} {
		_, ok, _, err := ConvertService(decodeService(t, tc.yaml), ServiceOptions{})
		if ok || err == nil || !strings.HasPrefix(err.Error(), tc.want) && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n  ok=%v err=%v\n  want error containing %q", tc.yaml, ok, err, tc.want)
		}
	}
}

func backendStrings(bs []lb.BackendParams) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		inst := lb.BackendInstance{Source: lb.SourceK8s, Params: b}
		s := inst.String() // "ns/name [k8s; attrs]"
		out[i] = b.Address.String() + " " + strings.TrimPrefix(s[strings.Index(s, "[k8s")+4:len(s)-1], ";")
	}
	slices.Sort(out)
	return out
}

func TestConvertEndpointSlice(t *testing.T) {
	es := decodeSlice(t, `
metadata:
  name: web-abc
  namespace: default
  labels: {kubernetes.io/service-name: web}
  annotations: {lbstate.io/weight: "50", lbstate.io/weights: "10.0.0.3=0"}
addressType: IPv4
ports:
- {name: http, port: 8080, protocol: TCP}
- {name: web, port: 8080, protocol: TCP}
- {name: metrics, port: 9090}
endpoints:
- addresses: [10.0.0.1]
  nodeName: n1
  zone: z1
  hints: {forZones: [{name: z1}], forNodes: [{name: n1}]}
- addresses: [10.0.0.2]
  conditions: {ready: false, serving: true, terminating: true}
- addresses: [10.0.0.3]
  conditions: {ready: true}
- addresses: [10.0.0.4]
  conditions: {ready: false, serving: false}
- addresses: [300.0.0.1, "fd00::1", 10.0.0.5, 0.0.0.0]
`)
	name, bs, errs, err := ConvertEndpointSlice(es)
	if err != nil {
		t.Fatal(err)
	}
	if name != lb.NewServiceName("default", "web") {
		t.Errorf("service %s", name)
	}
	want := []string{
		"10.0.0.1:8080/TCP  ports=http+web weight=50 node=n1 zone=z1 forZones=z1 forNodes=n1",
		"10.0.0.1:9090/TCP  ports=metrics weight=50 node=n1 zone=z1 forZones=z1 forNodes=n1",
		"10.0.0.2:8080/TCP  ports=http+web weight=50 terminating",
		"10.0.0.2:9090/TCP  ports=metrics weight=50 terminating",
		"10.0.0.3:8080/TCP  ports=http+web weight=0",
		"10.0.0.3:9090/TCP  ports=metrics weight=0",
		"10.0.0.4:8080/TCP  ports=http+web weight=50 not-ready",
		"10.0.0.4:9090/TCP  ports=metrics weight=50 not-ready",
		"10.0.0.5:8080/TCP  ports=http+web weight=50",
		"10.0.0.5:9090/TCP  ports=metrics weight=50",
	}
	if got := backendStrings(bs); !slices.Equal(got, want) {
		t.Errorf("backends\n  got  %q\n  want %q", got, want)
	}
	if len(errs) != 4 || !strings.Contains(errs[0].Error(), "endpointslice default/web-abc: endpoints[4].addresses[0]") ||
		!strings.Contains(errs[1].Error(), "fd00::1 is not of address type IPv4") ||
		!strings.Contains(errs[2].Error(), "endpoints[4].addresses[3]: backend 0.0.0.0:8080/TCP: address: unspecified address") {
		t.Errorf("endpoint errors: %v", errs)
	}
}

func TestConvertEndpointSliceErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{`{metadata: {name: s, namespace: default}, addressType: IPv4}`, "endpointslice default/s: label kubernetes.io/service-name: missing"},
		{`{metadata: {name: s, namespace: default, labels: {kubernetes.io/service-name: web}, annotations: {lbstate.io/weight: heavy}}, addressType: IPv4}`,
			`endpointslice default/s: annotation lbstate.io/weight: "heavy" is not a weight from 0 to 65535`},
		{`{metadata: {name: s, namespace: default, labels: {kubernetes.io/service-name: web}, annotations: {lbstate.io/weights: "10.0.0.1:5"}}, addressType: IPv4}`,
			`endpointslice default/s: annotation lbstate.io/weights: "10.0.0.1:5": want address=weight`},
	} {
		_, _, _, err := ConvertEndpointSlice(decodeSlice(t, tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.yaml, err, tc.want)
		}
	}
	// FQDN slices have nothing to balance to.
	_, bs, _, err := ConvertEndpointSlice(decodeSlice(t, `{metadata: {name: s, namespace: default, labels: {kubernetes.io/service-name: web}}, addressType: FQDN, endpoints: [{addresses: [example.com]}], ports: [{port: 80}]}`))
	if err != nil || len(bs) != 0 {
		t.Errorf("FQDN: %v %v", bs, err)
	}
}

// Random objects never panic the conversions, and what they accept is
// valid for the Writer.
func FuzzConvertService(f *testing.F) {
	f.Add([]byte(`{"metadata":{"name":"w","namespace":"d"},"spec":{"type":"NodePort","clusterIPs":["10.0.0.1","fd00::1"],"ports":[{"port":80,"nodePort":30000}]}}`))
	f.Add([]byte(`{"metadata":{"name":"w","namespace":"d"},"spec":{"type":"LoadBalancer","clusterIP":"1.2.3.4","externalTrafficPolicy":"Local","ports":[{"port":1,"protocol":"UDP"}]},"status":{"loadBalancer":{"ingress":[{"ip":"::1"}]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var svc corev1.Service
		if json.Unmarshal(data, &svc) != nil {
			return
		}
		p, ok, unknown, err := ConvertService(&svc, ServiceOptions{Node: testNode})
		if ok && err == nil {
			if verr := p.Validate(); verr != nil {
				t.Fatalf("accepted an invalid service: %v", verr)
			}
		}
		if len(unknown) > 0 && !ok {
			t.Fatalf("unknown values %v of a service not declared (err %v)", unknown, err)
		}
	})
}

func FuzzConvertEndpointSlice(f *testing.F) {
	f.Add([]byte(`{"metadata":{"name":"s","namespace":"d","labels":{"kubernetes.io/service-name":"w"}},"addressType":"IPv4","ports":[{"port":80}],"endpoints":[{"addresses":["10.0.0.1"]}]}`))
	f.Add([]byte(`{"metadata":{"name":"s","namespace":"d","labels":{"kubernetes.io/service-name":"w"},"annotations":{"lbstate.io/weights":"::1=3"}},"addressType":"IPv6","ports":[{"port":80,"name":"a"},{"port":80,"name":"b"}],"endpoints":[{"addresses":["::1"],"conditions":{"ready":false,"serving":true,"terminating":true}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var es discoveryv1.EndpointSlice
		if json.Unmarshal(data, &es) != nil {
			return
		}
		name, bs, _, err := ConvertEndpointSlice(&es)
		if err != nil {
			return
		}
		if name.Validate() != nil && len(bs) > 0 {
			return // the Writer rejects the name; nothing to check here
		}
		for i := range bs {
			if verr := bs[i].Validate(); verr != nil {
				t.Fatalf("accepted an invalid backend: %v", verr)
			}
		}
	})
}

func TestConvertServiceFamiliesAndDeprecatedHints(t *testing.T) {
	p, _, _, err := ConvertService(decodeService(t, `
metadata:
  name: web
  namespace: default
  annotations: {service.kubernetes.io/topology-aware-hints: auto}
spec:
  type: LoadBalancer
  allocateLoadBalancerNodePorts: false
  clusterIP: 10.96.0.1
  ports: [{port: 80}]
status:
  loadBalancer:
    ingress: [{ip: 192.0.2.1}, {ip: "2001:db8::1"}]
`), ServiceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := frontendStrings(p); !slices.Equal(got, []string{"10.96.0.1:80/TCP ClusterIP", "192.0.2.1:80/TCP LoadBalancer"}) {
		t.Errorf("an IPv6 ingress IP of an IPv4-only service became a frontend: %q", got)
	}
	if p.TrafficDistribution != lb.TrafficDistributionPreferSameZone {
		t.Errorf("topology-aware-hints: auto gave %s", p.TrafficDistribution)
	}
}

// kube-proxy (and Cilium) serve a LoadBalancer's nodePort whenever it is
// set, also with allocateLoadBalancerNodePorts false (a nodePort given
// explicitly, or kept from before the flag was turned off).
func TestConvertServiceNodePortWithoutAllocation(t *testing.T) {
	f := false
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lb"},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.1",
			AllocateLoadBalancerNodePorts: &f,
			Ports:                         []corev1.ServicePort{{Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP}},
		},
	}
	params, ok, _, err := ConvertService(svc, ServiceOptions{Node: lb.Node{Name: "n1"}})
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	for _, fe := range params.Frontends {
		if fe.Type == lb.SVCTypeNodePort {
			return
		}
	}
	t.Fatalf("no NodePort frontend for nodePort 30080: %v", params.Frontends)
}

// kube-proxy (GA LoadBalancerIPMode) and Cilium do not intercept an
// ingress IP whose ipMode is Proxy: traffic must reach the load balancer.
func TestConvertServiceSkipsProxyModeIngressIP(t *testing.T) {
	proxy := corev1.LoadBalancerIPModeProxy
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lb"},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.1",
			Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP}},
		},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{
			{IP: "192.0.2.1", IPMode: &proxy},
		}}},
	}
	params, ok, _, err := ConvertService(svc, ServiceOptions{Node: lb.Node{Name: "n1"}})
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	for _, fe := range params.Frontends {
		if fe.Type == lb.SVCTypeLoadBalancer {
			t.Fatalf("LoadBalancer frontend %s for an ingress IP in ipMode Proxy", fe.Address)
		}
	}
}

// Converting a slice with a few ports and no weights annotation allocates
// nothing but the backends it appends (here into a list with room): the
// converter and its ports stay on the stack. A change that moves them to
// the heap costs every slice of every service an allocation or two.
func TestSliceConversionAllocatesOnlyBackends(t *testing.T) {
	http, metrics, tcp := "http", "metrics", corev1.ProtocolTCP
	p1, p2 := int32(8080), int32(9090)
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "svc-x7k2q", Namespace: "ns", Labels: map[string]string{LabelServiceName: "svc"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &http, Port: &p1, Protocol: &tcp}, {Name: &metrics, Port: &p2, Protocol: &tcp}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}, {Addresses: []string{"10.0.0.2"}}},
	}
	out := make([]lb.BackendParams, 0, 4)
	var got []lb.BackendParams
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if got, _, err = appendSliceBackends(out[:0], es); err != nil {
			t.Fatal(err)
		}
	})
	if len(got) != 4 {
		t.Fatalf("%d backends, want 4", len(got))
	}
	// The port names: one list per port, built once per conversion.
	if allocs > 2 {
		t.Errorf("%.0f allocations per conversion, want at most 2 (each port's names)", allocs)
	}
}
