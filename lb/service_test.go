package lb_test

import (
	"encoding/json"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/lbstate/lbstate/lb"
)

// validParams returns a fresh declaration with every field set to a valid,
// non-default value.
func validParams() lb.ServiceParams {
	return lb.ServiceParams{
		Name:   lb.NewServiceName("default", "web"),
		Source: lb.SourceK8s,
		Frontends: []lb.FrontendParams{
			{Address: lb.MustParseL3n4Addr("10.96.0.1:80/TCP"), Type: lb.SVCTypeClusterIP, PortName: "http"},
			{Address: lb.MustParseL3n4Addr("0.0.0.0:30080/TCP"), Type: lb.SVCTypeNodePort, PortName: "http", Claim: lb.ClaimReservedNodePort},
			{Address: lb.MustParseL3n4Addr("0.0.0.0:30080/TCP/i"), Type: lb.SVCTypeNodePort, PortName: "http", Claim: lb.ClaimNodeAddress},
			{Address: lb.MustParseL3n4Addr("[fd00::1]:53/UDP"), Type: lb.SVCTypeClusterIP, PortName: "dns"},
		},
		ExtTrafficPolicy:       lb.TrafficPolicyLocal,
		IntTrafficPolicy:       lb.TrafficPolicyLocal,
		TrafficDistribution:    lb.TrafficDistributionPreferSameZone,
		SessionAffinity:        true,
		SessionAffinityTimeout: 60,
		SourceRanges:           []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/64")},
		Algorithm:              lb.AlgorithmMaglev,
		HealthCheckNodePort:    32000,
		Created:                time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC),
		Annotations:            map[string]string{"lbstate.io/health-check": "http"},
	}
}

func TestServiceParamsValidate(t *testing.T) {
	valid := validParams()
	if err := valid.Validate(); err != nil {
		t.Fatalf("Validate(valid) = %v", err)
	}
	minimal := lb.ServiceParams{Name: lb.MustParseServiceName("c2/ns/db"), Source: lb.SourceAPI}
	if err := minimal.Validate(); err != nil {
		t.Fatalf("Validate(minimal) = %v", err)
	}

	tests := []struct {
		name   string
		mutate func(*lb.ServiceParams)
		want   []string
	}{
		{"empty name", func(p *lb.ServiceParams) { p.Name = lb.NewServiceName("default", "") },
			[]string{"service default/", "name:", "empty namespace or name"}},
		{"zero name", func(p *lb.ServiceParams) { p.Name = lb.ServiceName{} },
			[]string{"name:", "empty namespace or name"}},
		{"slash in name", func(p *lb.ServiceParams) { p.Name = lb.NewServiceName("default", "w/eb") },
			[]string{"service default/w/eb", "name:", "'/'"}},
		{"no source", func(p *lb.ServiceParams) { p.Source = 0 },
			[]string{"service default/web", "source: unknown source"}},
		{"bad source", func(p *lb.ServiceParams) { p.Source = 9 },
			[]string{"service default/web", "source: unknown source source(9)"}},
		{"ext policy", func(p *lb.ServiceParams) { p.ExtTrafficPolicy = 2 },
			[]string{"service default/web", "extTrafficPolicy: value out of range"}},
		{"int policy", func(p *lb.ServiceParams) { p.IntTrafficPolicy = 5 },
			[]string{"service default/web", "intTrafficPolicy: value out of range"}},
		{"distribution", func(p *lb.ServiceParams) { p.TrafficDistribution = 3 },
			[]string{"service default/web", "trafficDistribution: value out of range"}},
		{"algorithm", func(p *lb.ServiceParams) { p.Algorithm = 3 },
			[]string{"service default/web", "algorithm: value out of range"}},
		{"missing frontend address", func(p *lb.ServiceParams) { p.Frontends[1].Address = lb.L3n4Addr{} },
			[]string{"service default/web", "frontends[1]", "address", "missing address"}},
		{"unspecified frontend without port", func(p *lb.ServiceParams) {
			p.Frontends[2].Address = lb.MustParseL3n4Addr("0.0.0.0:0/TCP")
		}, []string{"service default/web", "frontends[2]", "unspecified address needs a port"}},
		{"frontend bad protocol", func(p *lb.ServiceParams) {
			p.Frontends[0].Address = lb.NewL3n4Addr(1, netip.MustParseAddr("10.96.0.1"), 80, lb.ScopeExternal)
		}, []string{"service default/web", "frontends[0]", "unsupported protocol"}},
		{"missing type", func(p *lb.ServiceParams) { p.Frontends[1].Type = 0 },
			[]string{"service default/web", "frontends[1]", "0.0.0.0:30080/TCP", "type", "ClusterIP, NodePort"}},
		{"unknown type", func(p *lb.ServiceParams) { p.Frontends[3].Type = 7 },
			[]string{"service default/web", "frontends[3]", "type"}},
		{"duplicate frontend", func(p *lb.ServiceParams) { p.Frontends[3].Address = p.Frontends[0].Address },
			[]string{"service default/web", "frontends[3]", "10.96.0.1:80/TCP", "listed twice"}},
		{"duplicate frontend other type", func(p *lb.ServiceParams) {
			p.Frontends = append(p.Frontends, lb.FrontendParams{
				Address: p.Frontends[0].Address, Type: lb.SVCTypeExternalIP})
		}, []string{"frontends[4]", "listed twice"}},
		{"duplicate frontend in a long list", func(p *lb.ServiceParams) {
			// Past the list that is scanned: the duplicate is found by a map.
			for port := range uint16(30) {
				p.Frontends = append(p.Frontends, lb.FrontendParams{
					Address: lb.NewL3n4Addr(lb.ProtoTCP, netip.MustParseAddr("10.96.0.2"), 1000+port, lb.ScopeExternal), Type: lb.SVCTypeClusterIP})
			}
			p.Frontends = append(p.Frontends, p.Frontends[20])
		}, []string{"frontends[34]", "10.96.0.2:1016/TCP", "listed twice"}},
		{"invalid range", func(p *lb.ServiceParams) { p.SourceRanges[0] = netip.Prefix{} },
			[]string{"service default/web", "sourceRanges[0]", "invalid prefix"}},
		{"host bits", func(p *lb.ServiceParams) { p.SourceRanges[1] = netip.MustParsePrefix("fd00::1/64") },
			[]string{"service default/web", "sourceRanges[1]", "fd00::1/64", "host bits", "fd00::/64"}},
		{"claim out of range", func(p *lb.ServiceParams) { p.Frontends[1].Claim = 4 },
			[]string{"service default/web", "frontends[1]", "0.0.0.0:30080/TCP", "claim: value out of range"}},
		{"node-address claim of a ClusterIP", func(p *lb.ServiceParams) { p.Frontends[0].Claim = lb.ClaimNodeAddress },
			[]string{"service default/web", "frontends[0]", "10.96.0.1:80/TCP", "claim: node-address is for NodePort and HostPort frontends, not ClusterIP"}},
		{"reserved-node-port claim of a HostPort", func(p *lb.ServiceParams) {
			p.Frontends[1].Type, p.Frontends[1].Claim = lb.SVCTypeHostPort, lb.ClaimReservedNodePort
		}, []string{"frontends[1]", "claim: reserved-node-port is for NodePort frontends, not HostPort"}},
		{"redirect claim of a ClusterIP", func(p *lb.ServiceParams) { p.Frontends[0].Claim = lb.ClaimRedirect },
			[]string{"frontends[0]", "claim: redirect is for LocalRedirect frontends, not ClusterIP"}},
		{"created past year 9999", func(p *lb.ServiceParams) { p.Created = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
			[]string{"service default/web", "created: year 10000 is outside 0-9999"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validParams()
			tt.mutate(&p)
			wantErr(t, p.Validate(), tt.want...)
		})
	}
}

func TestFrontendParamsValidate(t *testing.T) {
	fe := lb.FrontendParams{Address: lb.MustParseL3n4Addr("10.96.0.1:80/TCP"), Type: lb.SVCTypeLocalRedirect}
	if err := fe.Validate(); err != nil {
		t.Errorf("Validate = %v", err)
	}
	fe.Type = 0
	wantErr(t, fe.Validate(), "10.96.0.1:80/TCP: type")
	fe.Address = lb.L3n4Addr{}
	wantErr(t, fe.Validate(), "address: missing address")
}

func TestAffinityTimeout(t *testing.T) {
	for _, tt := range []struct {
		affinity bool
		timeout  uint32
		want     uint32
	}{
		{false, 0, 0},
		{false, 60, 0},
		{true, 0, lb.DefaultAffinityTimeout},
		{true, 1, 1},
		{true, 60, 60},
		{true, 86400, 86400},
	} {
		p := lb.ServiceParams{SessionAffinity: tt.affinity, SessionAffinityTimeout: tt.timeout}
		if got := p.AffinityTimeout(); got != tt.want {
			t.Errorf("AffinityTimeout(affinity=%v, timeout=%d) = %d, want %d", tt.affinity, tt.timeout, got, tt.want)
		}
	}
	if lb.DefaultAffinityTimeout != 3*60*60 {
		t.Errorf("DefaultAffinityTimeout = %d, want 3h", lb.DefaultAffinityTimeout)
	}
}

// The external traffic policy applies to the external-scope addresses of
// external types, the internal one to everything else.
func TestTrafficPolicyFor(t *testing.T) {
	p := lb.ServiceParams{ExtTrafficPolicy: lb.TrafficPolicyLocal, IntTrafficPolicy: lb.TrafficPolicyCluster}
	for _, tt := range []struct {
		typ      lb.SVCType
		addr     string
		external bool
	}{
		{lb.SVCTypeClusterIP, "10.96.0.1:80/TCP", false},
		{lb.SVCTypeNodePort, "0.0.0.0:30080/TCP", true},
		{lb.SVCTypeNodePort, "0.0.0.0:30080/TCP/i", false},
		{lb.SVCTypeLoadBalancer, "192.0.2.1:80/TCP", true},
		{lb.SVCTypeLoadBalancer, "192.0.2.1:80/TCP/i", false},
		{lb.SVCTypeExternalIP, "192.0.2.2:80/TCP", true},
		{lb.SVCTypeHostPort, "0.0.0.0:8080/TCP", true},
		{lb.SVCTypeLocalRedirect, "169.254.0.1:53/UDP", false},
	} {
		fe := lb.FrontendParams{Address: lb.MustParseL3n4Addr(tt.addr), Type: tt.typ}
		want := lb.TrafficPolicyCluster
		if tt.external {
			want = lb.TrafficPolicyLocal
		}
		if got := fe.UsesExternalTrafficPolicy(); got != tt.external {
			t.Errorf("%s %s: UsesExternalTrafficPolicy() = %v, want %v", tt.typ, tt.addr, got, tt.external)
		}
		if got := p.TrafficPolicyFor(fe); got != want {
			t.Errorf("%s %s: TrafficPolicyFor = %s, want %s", tt.typ, tt.addr, got, want)
		}
	}
}

func TestServiceParamsEqual(t *testing.T) {
	a, b := validParams(), validParams()
	if !a.Equal(&b) || !b.Equal(&a) {
		t.Fatal("equal declarations built separately are not Equal")
	}
	empty1, empty2 := lb.ServiceParams{}, lb.ServiceParams{Frontends: []lb.FrontendParams{}}
	if !empty1.Equal(&empty2) {
		t.Error("nil and empty frontends are not Equal")
	}

	tests := []struct {
		field  string
		mutate func(*lb.ServiceParams)
	}{
		{"Name", func(p *lb.ServiceParams) { p.Name = lb.NewServiceName("default", "web2") }},
		{"Name cluster", func(p *lb.ServiceParams) { p.Name = p.Name.WithCluster("c2") }},
		{"Source", func(p *lb.ServiceParams) { p.Source = lb.SourceAPI }},
		{"Frontends address", func(p *lb.ServiceParams) { p.Frontends[0].Address = p.Frontends[0].Address.WithPort(81) }},
		{"Frontends scope", func(p *lb.ServiceParams) {
			p.Frontends[0].Address = p.Frontends[0].Address.WithScope(lb.ScopeInternal)
		}},
		{"Frontends type", func(p *lb.ServiceParams) { p.Frontends[3].Type = lb.SVCTypeExternalIP }},
		{"Frontends port name", func(p *lb.ServiceParams) { p.Frontends[1].PortName = "https" }},
		{"Frontends removed", func(p *lb.ServiceParams) { p.Frontends = p.Frontends[:3] }},
		{"Frontends order", func(p *lb.ServiceParams) { slices.Reverse(p.Frontends) }},
		{"ExtTrafficPolicy", func(p *lb.ServiceParams) { p.ExtTrafficPolicy = lb.TrafficPolicyCluster }},
		{"IntTrafficPolicy", func(p *lb.ServiceParams) { p.IntTrafficPolicy = lb.TrafficPolicyCluster }},
		{"TrafficDistribution", func(p *lb.ServiceParams) { p.TrafficDistribution = lb.TrafficDistributionPreferSameNode }},
		{"SessionAffinity", func(p *lb.ServiceParams) { p.SessionAffinity = false }},
		{"SessionAffinityTimeout", func(p *lb.ServiceParams) { p.SessionAffinityTimeout = 61 }},
		{"SourceRanges value", func(p *lb.ServiceParams) { p.SourceRanges[0] = netip.MustParsePrefix("10.0.0.0/9") }},
		{"SourceRanges nil", func(p *lb.ServiceParams) { p.SourceRanges = nil }},
		{"Algorithm", func(p *lb.ServiceParams) { p.Algorithm = lb.AlgorithmRandom }},
		{"HealthCheckNodePort", func(p *lb.ServiceParams) { p.HealthCheckNodePort = 32001 }},
		{"Frontends claim", func(p *lb.ServiceParams) { p.Frontends[2].Claim = lb.ClaimExplicit }},
		{"Created", func(p *lb.ServiceParams) { p.Created = p.Created.Add(time.Second) }},
		{"Created unknown", func(p *lb.ServiceParams) { p.Created = time.Time{} }},
		{"Annotations value", func(p *lb.ServiceParams) { p.Annotations["lbstate.io/health-check"] = "tcp" }},
		{"Annotations nil", func(p *lb.ServiceParams) { p.Annotations = nil }},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			base, changed := validParams(), validParams()
			tt.mutate(&changed)
			if base.Equal(&changed) || changed.Equal(&base) {
				t.Errorf("Equal ignores a change of %s", tt.field)
			}
		})
	}
}

func TestServiceParamsJSON(t *testing.T) {
	in := validParams()
	out, err := json.Marshal(&in)
	if err != nil {
		t.Fatal(err)
	}
	var back lb.ServiceParams
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatalf("decoding %s: %v", out, err)
	}
	if !back.Equal(&in) {
		t.Errorf("JSON round trip changed the declaration:\n%s\n%+v", out, back)
	}
	// The same time in another location is the same creation time.
	local := in
	local.Created = in.Created.In(time.FixedZone("UTC+2", 7200))
	if !local.Equal(&in) {
		t.Error("a creation time in another location is not Equal")
	}
}

func TestServiceWithParams(t *testing.T) {
	name := lb.NewServiceName("default", "web")
	decl := func(src lb.Source, port uint16) lb.ServiceParams {
		return lb.ServiceParams{Name: name, Source: src, HealthCheckNodePort: port}
	}
	s0 := &lb.Service{Name: name}
	if s0.Policy() != nil {
		t.Error("Policy() of a service with no declarations is not nil")
	}
	s1 := s0.WithParams(decl(lb.SourceK8s, 1))
	s2 := s1.WithParams(decl(lb.SourceKVStore, 2))
	s3 := s2.WithParams(decl(lb.SourceAPI, 3))
	s4 := s3.WithParams(decl(lb.SourceK8s, 4))

	if got := s4.Sources(); !slices.Equal(got, []lb.Source{lb.SourceAPI, lb.SourceK8s, lb.SourceKVStore}) {
		t.Errorf("Sources() = %v", got)
	}
	if p := s4.Policy(); p == nil || p.Source != lb.SourceAPI || p.HealthCheckNodePort != 3 {
		t.Errorf("Policy() = %+v, want the api declaration", p)
	}
	if s4.Params[1].HealthCheckNodePort != 4 {
		t.Errorf("k8s declaration not replaced: %+v", s4.Params[1])
	}
	if len(s0.Params) != 0 || len(s1.Params) != 1 || s3.Params[1].HealthCheckNodePort != 1 {
		t.Error("WithParams modified its receiver")
	}

	s5 := s4.WithoutSource(lb.SourceAPI)
	if got := s5.Sources(); !slices.Equal(got, []lb.Source{lb.SourceK8s, lb.SourceKVStore}) {
		t.Errorf("Sources() after WithoutSource = %v", got)
	}
	if got := s4.Sources(); !slices.Equal(got, []lb.Source{lb.SourceAPI, lb.SourceK8s, lb.SourceKVStore}) {
		t.Errorf("WithoutSource modified its receiver: %v", got)
	}
}

func TestRedirectValidate(t *testing.T) {
	from := lb.NewServiceName("default", "web")
	to := lb.NewServiceName("default", "local-web")
	if err := (lb.Redirect{Source: lb.SourceRedirect, To: to}).Validate(from); err != nil {
		t.Errorf("Validate(valid) = %v", err)
	}
	for _, tt := range []struct {
		r    lb.Redirect
		want string
	}{
		{lb.Redirect{To: to}, "redirect source: unknown source"},
		{lb.Redirect{Source: lb.SourceRedirect}, "redirect target: missing service name"},
		{lb.Redirect{Source: lb.SourceRedirect, To: from}, "cannot redirect to itself"},
		{lb.Redirect{Source: lb.SourceRedirect, To: lb.NewServiceName("default", "a/b")}, "redirect target"},
	} {
		wantErr(t, tt.r.Validate(from), "service default/web", tt.want)
	}
	if got := (lb.Redirect{Source: lb.SourceAPI, To: to}).String(); got != "default/local-web (api)" {
		t.Errorf("Redirect.String() = %q", got)
	}
}

// A clone shares no slice or map with the original: the Writer keeps
// clones of what sources pass, which sources may then change.
func TestServiceParamsCloneSharesNothing(t *testing.T) {
	orig := validParams()
	c := orig.Clone()
	c.Frontends[0].PortName = "changed"
	c.SourceRanges[0] = netip.MustParsePrefix("192.0.2.0/24")
	c.Annotations["lbstate.io/health-check"] = "tcp"
	if want := validParams(); !orig.Equal(&want) {
		t.Errorf("changing the clone changed the original: %+v", orig)
	}
}

// A redirect port without a number covers every port of its protocol.
func TestRedirectPortWithoutNumberCoversItsProtocol(t *testing.T) {
	r := lb.Redirect{Ports: []lb.RedirectPort{{Protocol: lb.ProtoUDP}}}
	for addr, want := range map[string]bool{"10.96.0.10:53/UDP": true, "10.96.0.10:5353/UDP": true, "10.96.0.10:53/TCP": false} {
		if got := r.Covers(lb.FrontendParams{Address: lb.MustParseL3n4Addr(addr), Type: lb.SVCTypeClusterIP}); got != want {
			t.Errorf("covers %s: %v, want %v", addr, got, want)
		}
	}
}
