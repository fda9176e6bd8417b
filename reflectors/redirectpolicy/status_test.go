package redirectpolicy

import (
	"slices"
	"strings"
	"testing"

	"github.com/lbstate/lbstate/lb"
)

// Describe says what a policy redirects and, when not, every reason.
func TestDescribeSaysWhyNot(t *testing.T) {
	target := TargetName("kube-system", "dns")
	svc := lb.NewServiceName("kube-system", "kube-dns")
	addr := lb.MustParseL3n4Addr("169.254.20.10:53/UDP")
	ready := []PodRef{{Name: "a", State: lb.BackendActive}}
	redirected := &lb.Frontend{FrontendParams: lb.FrontendParams{Address: lb.MustParseL3n4Addr("10.96.0.10:53/UDP"), Type: lb.SVCTypeClusterIP}, Service: svc}
	redirected.SetExtras(lb.FrontendExtras{RedirectedTo: target})
	frontends := []*lb.Frontend{
		redirected,
		{FrontendParams: lb.FrontendParams{Address: addr, Type: lb.SVCTypeClusterIP}, Service: lb.NewServiceName("default", "owner")},
	}
	for _, tc := range []struct {
		name      string
		st        Status
		redirects int
		why       string
	}{
		{"redirecting", Status{Valid: true, Service: svc, Pods: ready}, 1, ""},
		{"invalid", Status{Error: "policy kube-system/dns: spec.x: bad"}, 0, "invalid: policy kube-system/dns: spec.x: bad"},
		{"invalid update", Status{Valid: true, Service: svc, Pods: ready, Error: "bad"}, 1, "latest version rejected, the last valid one applies: bad"},
		{"lost", Status{Valid: true, Service: svc, Pods: ready, LostTo: "kube-system/older"}, 1,
			"service kube-system/kube-dns is redirected by the older policy kube-system/older"},
		{"no service", Status{Valid: true, Service: lb.NewServiceName("kube-system", "nope"), Pods: ready}, 0,
			"service kube-system/nope has no frontends (not declared yet?)"},
		{"address owned", Status{Valid: true, Addresses: []lb.L3n4Addr{addr}, Pods: ready}, 0,
			"address 169.254.20.10:53/UDP is owned by service default/owner"},
		{"no pods", Status{Valid: true, Service: svc}, 1, "no pod on this node in namespace kube-system matches the selector"},
		{"unready", Status{Valid: true, Service: svc, Pods: []PodRef{{Name: "a", State: lb.BackendNotReady}}, Problems: []string{"policy kube-system/dns: pod a lacks x"}}, 1,
			"pod a lacks x; no selected pod is ready"},
	} {
		st := tc.st
		st.Name, st.Target = "kube-system/dns", target
		rep := Describe(slices.Values([]*Status{&st}), slices.Values(frontends))[0]
		if len(rep.Redirects) != tc.redirects || strings.Join(rep.Why, "; ") != tc.why {
			t.Errorf("%s: redirects %v, why %q; want %d, %q", tc.name, rep.Redirects, rep.Why, tc.redirects, tc.why)
		}
	}
}
