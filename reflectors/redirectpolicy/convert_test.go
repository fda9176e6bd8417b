package redirectpolicy

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/lbstate/lbstate/lb"
)

// policy decodes a policy's spec from YAML, in namespace kube-system.
func policy(t testing.TB, specYAML string) *Policy {
	t.Helper()
	p := &Policy{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "lrp"}}
	if err := yaml.UnmarshalStrict([]byte(specYAML), &p.Spec); err != nil {
		t.Fatal(err)
	}
	return p
}

func dnsPod(name string, ready bool, ips ...string) Pod {
	p := Pod{Namespace: "kube-system", Name: name, Labels: map[string]string{"k8s-app": "node-local-dns"}, Ready: ready,
		Ports: []ContainerPort{{"dns", 5353, lb.ProtoUDP}, {"dns-tcp", 5353, lb.ProtoTCP}}}
	for _, ip := range ips {
		p.IPs = append(p.IPs, netip.MustParseAddr(ip))
	}
	return p
}

// summary prints a plan's frontends, redirected ports and backends.
func summary(p Plan) string {
	var b strings.Builder
	for _, f := range p.Frontends {
		fmt.Fprintf(&b, "fe %s %s %q\n", f.Address, f.Type, f.PortName)
	}
	if !p.Service.IsZero() {
		fmt.Fprintf(&b, "svc %s ports %v\n", p.Service, p.Ports)
	}
	if !p.Serving {
		b.WriteString("not serving\n")
	}
	for _, be := range p.Backends {
		fmt.Fprintf(&b, "be %s %v", be.Address, be.PortNames())
		if be.State != lb.BackendActive {
			fmt.Fprintf(&b, " %s", be.State)
		}
		b.WriteString("\n")
	}
	return b.String()
}

const selectDNS = "  localEndpointSelector: {matchLabels: {k8s-app: node-local-dns}}\n"

// Unready pods are kept as not-ready backends (no new flows, but their
// backend IDs and connections survive a readiness flip); a terminating
// pod that still reports ready takes new flows only when nothing else
// does; a finished pod is no backend.
func TestConvertMapsFrontendPortsToLocalPods(t *testing.T) {
	terminating := dnsPod("f", true, "10.0.1.6")
	terminating.Terminating = true
	finished := dnsPod("g", true, "10.0.1.7")
	finished.Finished = true
	pods := []Pod{
		dnsPod("a", true, "10.0.1.1", "fd00::1"),
		dnsPod("b", false, "10.0.1.2"), // not ready
		terminating,
		finished,
		dnsPod("c", true), // no IP yet
		{Namespace: "default", Name: "d", Labels: map[string]string{"k8s-app": "node-local-dns"}, Ready: true,
			IPs: []netip.Addr{netip.MustParseAddr("10.0.1.4")}}, // another namespace
		{Namespace: "kube-system", Name: "e", Ready: true, IPs: []netip.Addr{netip.MustParseAddr("10.0.1.5")},
			Ports: []ContainerPort{{"dns", 53, lb.ProtoUDP}}, Labels: map[string]string{"k8s-app": "node-local-dns"}}, // lacks dns-tcp
	}
	for _, tc := range []struct {
		name, spec, want string
		problems         int
		pods             []Pod // nil: pods
	}{{
		name: "address, single port, by number",
		spec: "redirectFrontend: {addressMatcher: {ip: 169.254.169.254, toPorts: [{port: '8080', protocol: TCP}]}}\n" +
			"redirectBackend:\n" + selectDNS + "  toPorts: [{port: '80', protocol: TCP}]\n",
		want: "fe 169.254.169.254:8080/TCP LocalRedirect \"\"\nbe 10.0.1.1:80/TCP []\nbe 10.0.1.2:80/TCP [] not-ready\nbe 10.0.1.5:80/TCP []\n" +
			"be 10.0.1.6:80/TCP [] terminating\nbe [fd00::1]:80/TCP []\n",
	}, {
		name: "address, named ports, by the pods' container port names",
		spec: "redirectFrontend: {addressMatcher: {ip: 169.254.20.10, toPorts: [{port: '53', protocol: UDP, name: dns}, {port: '53', protocol: TCP, name: dns-tcp}]}}\n" +
			"redirectBackend:\n" + selectDNS + "  toPorts: [{port: '53', protocol: UDP, name: dns}, {port: '53', protocol: TCP, name: dns-tcp}]\n",
		want: "fe 169.254.20.10:53/UDP LocalRedirect \"dns\"\nfe 169.254.20.10:53/TCP LocalRedirect \"dns-tcp\"\n" +
			"be 10.0.1.1:5353/TCP [dns-tcp]\nbe 10.0.1.1:5353/UDP [dns]\nbe 10.0.1.2:5353/TCP [dns-tcp] not-ready\nbe 10.0.1.2:5353/UDP [dns] not-ready\n" +
			"be 10.0.1.5:53/UDP [dns]\nbe 10.0.1.6:5353/TCP [dns-tcp] terminating\nbe 10.0.1.6:5353/UDP [dns] terminating\n" +
			"be [fd00::1]:5353/TCP [dns-tcp]\nbe [fd00::1]:5353/UDP [dns]\n",
		problems: 1, // e has no dns-tcp
	}, {
		name: "service, all ports",
		spec: "redirectFrontend: {serviceMatcher: {serviceName: kube-dns, namespace: kube-system}}\n" +
			"redirectBackend:\n" + selectDNS + "  toPorts: [{port: '53', protocol: UDP}]\n",
		want: "svc kube-system/kube-dns ports [{ 0 UDP}]\nbe 10.0.1.1:53/UDP []\nbe 10.0.1.2:53/UDP [] not-ready\nbe 10.0.1.5:53/UDP []\n" +
			"be 10.0.1.6:53/UDP [] terminating\nbe [fd00::1]:53/UDP []\n",
	}, {
		name: "service, one numbered port",
		spec: "redirectFrontend: {serviceMatcher: {serviceName: kube-dns, namespace: kube-system, toPorts: [{port: '53', protocol: UDP}]}}\n" +
			"redirectBackend:\n  localEndpointSelector: {matchExpressions: [{key: k8s-app, operator: In, values: [node-local-dns]}]}\n  toPorts: [{port: '53', protocol: UDP, name: dns}]\n",
		want: "svc kube-system/kube-dns ports [{ 53 UDP}]\nbe 10.0.1.1:53/UDP []\nbe 10.0.1.2:53/UDP [] not-ready\nbe 10.0.1.5:53/UDP []\n" +
			"be 10.0.1.6:53/UDP [] terminating\nbe [fd00::1]:53/UDP []\n",
	}, {
		name: "selector matching nothing",
		spec: "redirectFrontend: {serviceMatcher: {serviceName: kube-dns, namespace: kube-system}}\n" +
			"redirectBackend:\n  localEndpointSelector: {matchLabels: {app: other}}\n  toPorts: [{port: '53', protocol: UDP}]\n",
		want: "svc kube-system/kube-dns ports []\nnot serving\n",
	}, {
		name: "only unready pods: nothing redirected, the pods kept for when one is ready",
		spec: "redirectFrontend: {addressMatcher: {ip: 169.254.20.10, toPorts: [{port: '53', protocol: UDP}]}}\n" +
			"redirectBackend:\n  localEndpointSelector: {matchLabels: {k8s-app: node-local-dns}, matchExpressions: [{key: x, operator: DoesNotExist}]}\n" +
			"  toPorts: [{port: '53', protocol: UDP}]\n",
		want: "not serving\nbe 10.0.1.2:53/UDP [] not-ready\n",
		pods: []Pod{dnsPod("b", false, "10.0.1.2")},
	}, {
		name: "a pod declaring no ports is taken at the policy's numbers",
		spec: "redirectFrontend: {serviceMatcher: {serviceName: kube-dns, namespace: kube-system, toPorts: [{port: '53', protocol: TCP, name: dns-tcp}]}}\n" +
			"redirectBackend:\n" + selectDNS + "  toPorts: [{port: '5300', protocol: TCP, name: dns-tcp}, {port: '5300', protocol: UDP, name: dns}]\n",
		want: "svc kube-system/kube-dns ports [{dns-tcp 0 ANY}]\nbe 10.0.1.8:5300/TCP [dns-tcp]\nbe 10.0.1.8:5300/UDP [dns]\n",
		pods: []Pod{{Namespace: "kube-system", Name: "h", Ready: true, IPs: []netip.Addr{netip.MustParseAddr("10.0.1.8")},
			Labels: map[string]string{"k8s-app": "node-local-dns"}}},
	}, {
		name: "service, all ports, named backend ports: only the names a pod serves",
		spec: "redirectFrontend: {serviceMatcher: {serviceName: kube-dns, namespace: kube-system}}\n" +
			"redirectBackend:\n" + selectDNS + "  toPorts: [{port: '53', protocol: UDP, name: dns}, {port: '53', protocol: TCP, name: dns-tcp}]\n",
		want:     "svc kube-system/kube-dns ports [{dns 0 ANY}]\nbe 10.0.1.5:53/UDP [dns]\n",
		pods:     []Pod{pods[6]},
		problems: 1,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			in := pods
			if tc.pods != nil {
				in = tc.pods
			}
			plan, problems, err := Convert(policy(t, tc.spec), in, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := summary(plan); got != tc.want {
				t.Errorf("got\n%swant\n%s", got, tc.want)
			}
			if len(problems) != tc.problems {
				t.Errorf("problems %v, want %d", problems, tc.problems)
			}
			if plan.Target != lb.NewServiceName("kube-system", "lrp:lrp") {
				t.Errorf("target %s", plan.Target)
			}
		})
	}
}

func TestConvertRejectsBadPoliciesNamingTheField(t *testing.T) {
	be := "redirectBackend:\n" + selectDNS + "  toPorts: [{port: '53', protocol: UDP}]\n"
	addr := func(ip, port, proto string) string {
		return fmt.Sprintf("redirectFrontend: {addressMatcher: {ip: %q, toPorts: [{port: %q, protocol: %s}]}}\n", ip, port, proto)
	}
	for _, tc := range []struct{ spec, want string }{
		{addr("169.254.20.300", "53", "UDP") + be, `policy kube-system/lrp: spec.redirectFrontend.addressMatcher.ip: invalid IP "169.254.20.300"`},
		{addr("169.254.20.10", "0", "UDP") + be, `spec.redirectFrontend.addressMatcher.toPorts[0].port: "0" is not a port number`},
		{addr("169.254.20.10", "53", "UPD") + be, `spec.redirectFrontend.addressMatcher.toPorts[0].protocol: unknown protocol "UPD"`},
		{"redirectFrontend: {}\n" + be, "spec.redirectFrontend: neither addressMatcher nor serviceMatcher"},
		{"redirectFrontend: {serviceMatcher: {serviceName: a, namespace: kube-system}, addressMatcher: {ip: 1.2.3.4, toPorts: [{port: '1', protocol: TCP}]}}\n" + be,
			"spec.redirectFrontend: both addressMatcher and serviceMatcher"},
		{"redirectFrontend: {serviceMatcher: {serviceName: a, namespace: default}}\n" + be, `serviceMatcher.namespace: "default" is not the policy's namespace`},
		{"redirectFrontend: {serviceMatcher: {serviceName: a, namespace: kube-system}}\n" +
			"redirectBackend:\n  localEndpointSelector: {matchExpressions: [{key: k, operator: Near}]}\n  toPorts: [{port: '53', protocol: UDP}]\n",
			"spec.redirectBackend.localEndpointSelector: "},
		{"redirectFrontend: {serviceMatcher: {serviceName: a, namespace: kube-system}}\n" +
			"redirectBackend:\n" + selectDNS + "  toPorts: [{port: '53', protocol: UDP, name: dns}, {port: '53', protocol: TCP}]\n",
			"spec.redirectBackend.toPorts[1].name: missing (several ports need names)"},
		{"redirectFrontend: {serviceMatcher: {serviceName: a, namespace: kube-system, toPorts: [{port: '443', protocol: UDP, name: https}]}}\n" +
			"redirectBackend:\n" + selectDNS + "  toPorts: [{port: '8443', protocol: TCP, name: https}, {port: '8443', protocol: UDP, name: dtls}]\n",
			`spec.redirectFrontend.toPorts[0].protocol: UDP, but "https" is TCP in spec.redirectBackend.toPorts`},
		{addr("169.254.20.10", "53", "TCP") + be, "spec.redirectFrontend.toPorts[0].protocol: TCP, but the backend port is UDP"},
	} {
		_, _, err := Convert(policy(t, tc.spec), nil, Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("spec\n%s: error %v, want %q", tc.spec, err, tc.want)
		}
	}
}

// A frontend port whose name the backend ports lack is left out, not the
// policy (as in Cilium): the other ports are redirected, and the problem
// names the policy, the field and the port. (This once rejected the
// whole policy.)
func TestConvertLeavesOutAFrontendPortTheBackendLacks(t *testing.T) {
	for _, tc := range []struct{ name, frontend, want, problem string }{{
		name:     "address",
		frontend: "redirectFrontend: {addressMatcher: {ip: 169.254.20.10, toPorts: [{port: '53', protocol: UDP, name: dns}, {port: '53', protocol: TCP, name: tcp}]}}\n",
		want:     "fe 169.254.20.10:53/UDP LocalRedirect \"dns\"\nbe 10.0.1.1:5353/TCP [dns-tcp]\nbe 10.0.1.1:5353/UDP [dns]\n",
		problem:  `policy kube-system/lrp: spec.redirectFrontend.addressMatcher.toPorts[1].name: "tcp" has no port of that name in spec.redirectBackend.toPorts: port not redirected`,
	}, {
		name:     "service",
		frontend: "redirectFrontend: {serviceMatcher: {serviceName: kube-dns, namespace: kube-system, toPorts: [{port: '53', protocol: TCP, name: tcp}, {port: '53', protocol: UDP, name: dns}]}}\n",
		want:     "svc kube-system/kube-dns ports [{dns 0 ANY}]\nbe 10.0.1.1:5353/TCP [dns-tcp]\nbe 10.0.1.1:5353/UDP [dns]\n",
		problem:  `policy kube-system/lrp: spec.redirectFrontend.serviceMatcher.toPorts[0].name: "tcp" has no port of that name in spec.redirectBackend.toPorts: port not redirected`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.frontend + "redirectBackend:\n" + selectDNS +
				"  toPorts: [{port: '53', protocol: UDP, name: dns}, {port: '53', protocol: TCP, name: dns-tcp}]\n"
			plan, problems, err := Convert(policy(t, spec), []Pod{dnsPod("a", true, "10.0.1.1")}, Options{})
			if err != nil {
				t.Fatalf("policy rejected: %v", err)
			}
			if got := summary(plan); got != tc.want {
				t.Errorf("got\n%swant\n%s", got, tc.want)
			}
			if len(problems) != 1 || problems[0].Error() != tc.problem {
				t.Errorf("problems %v, want [%s]", problems, tc.problem)
			}
		})
	}
	// No frontend port has a backend: the policy is valid and redirects
	// nothing.
	spec := "redirectFrontend: {addressMatcher: {ip: 169.254.20.10, toPorts: [{port: '53', protocol: UDP, name: a}, {port: '53', protocol: TCP, name: b}]}}\n" +
		"redirectBackend:\n" + selectDNS + "  toPorts: [{port: '53', protocol: UDP, name: dns}, {port: '53', protocol: TCP, name: dns-tcp}]\n"
	plan, problems, err := Convert(policy(t, spec), []Pod{dnsPod("a", true, "10.0.1.1")}, Options{})
	if err != nil || plan.Serving || len(plan.Frontends) != 0 || len(problems) != 2 {
		t.Errorf("no port paired: err %v, serving %v, frontends %v, problems %v; want a valid policy redirecting nothing, 2 problems",
			err, plan.Serving, plan.Frontends, problems)
	}
}

func TestConvertLimitsAddressesToTheAllowedCIDRs(t *testing.T) {
	p := policy(t, "redirectFrontend: {addressMatcher: {ip: 10.96.0.10, toPorts: [{port: '53', protocol: UDP}]}}\n"+
		"redirectBackend:\n"+selectDNS+"  toPorts: [{port: '53', protocol: UDP}]\n")
	opts := Options{AddressCIDRs: []netip.Prefix{netip.MustParsePrefix("169.254.0.0/16")}}
	if _, _, err := Convert(p, nil, opts); err == nil || !strings.Contains(err.Error(), "addressMatcher.ip: 10.96.0.10 not in --lrp-address-matcher-cidrs") {
		t.Fatalf("error %v", err)
	}
	p.Spec.RedirectFrontend.AddressMatcher.IP = "169.254.20.10"
	if _, _, err := Convert(p, nil, opts); err != nil {
		t.Fatal(err)
	}
}

// Whatever a policy says, Convert returns an error or a plan whose
// frontends and backends are valid and that redirects nothing when no
// pod serves, and never panics.
func FuzzConvert(f *testing.F) {
	f.Add("169.254.20.10", "53", "UDP", "dns", "53", "UDP", "dns", "k8s-app", "In", true)
	f.Add("", "80", "TCP", "", "8080", "TCP", "", "app", "Exists", false)
	f.Add("::1", "0", "SCTP", "x", "65536", "udp", "y", "", "NotIn", true)
	pods := []Pod{dnsPod("a", true, "10.0.1.1", "fd00::1"), dnsPod("b", true, "10.0.1.2"), dnsPod("c", false, "10.0.1.3")}
	f.Fuzz(func(t *testing.T, ip, fport, fproto, fname, bport, bproto, bname, key, op string, second bool) {
		p := &Policy{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "lrp"}}
		fps := []PortInfo{{Port: fport, Protocol: fproto, Name: fname}}
		bps := []PortInfo{{Port: bport, Protocol: bproto, Name: bname}}
		if second {
			fps = append(fps, PortInfo{Port: "53", Protocol: "TCP", Name: "dns-tcp"})
			bps = append(bps, PortInfo{Port: "53", Protocol: "TCP", Name: "dns-tcp"})
		}
		if ip != "" {
			p.Spec.RedirectFrontend.AddressMatcher = &AddressMatcher{IP: ip, ToPorts: fps}
		} else {
			p.Spec.RedirectFrontend.ServiceMatcher = &ServiceMatcher{ServiceName: "kube-dns", ToPorts: fps}
		}
		p.Spec.RedirectBackend = Backend{ToPorts: bps, LocalEndpointSelector: metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: metav1.LabelSelectorOperator(op), Values: []string{"node-local-dns"}}}}}
		plan, _, err := Convert(p, pods, Options{})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "policy kube-system/lrp: spec.") {
				t.Fatalf("error does not name the policy and field: %v", err)
			}
			return
		}
		if !plan.Serving && (len(plan.Frontends) > 0 || len(plan.Ports) > 0) {
			t.Fatalf("a plan serving nothing redirects %v %v", plan.Frontends, plan.Ports)
		}
		svc := lb.ServiceParams{Name: plan.Target, Source: lb.SourceRedirect, Frontends: plan.Frontends}
		if len(plan.Frontends) > 0 {
			if err := svc.Validate(); err != nil {
				t.Fatalf("invalid frontends: %v", err)
			}
		}
		for _, b := range plan.Backends {
			if err := b.Address.Validate(); err != nil || b.Address.Port() == 0 {
				t.Fatalf("invalid backend %s: %v", b.Address, err)
			}
		}
	})
}
