package k8s

import (
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// An endpoint's state follows its own conditions as the EndpointSlice API
// defines them (ready and serving nil mean true, terminating nil false)
// and as kube-proxy reads them: ready takes new flows whatever terminating
// says; serving and terminating is a fallback; anything else takes no new
// flows but stays, for the connections it carries. (The conversion once
// decided from the Service's publishNotReadyAddresses and dropped
// not-ready endpoints.)
func TestEndpointStateFollowsTheAPIsConditions(t *testing.T) {
	yes, no := new(bool), new(bool)
	*yes = true
	for _, tc := range []struct {
		ready, serving, terminating *bool
		want                        lb.BackendState
	}{
		{nil, nil, nil, lb.BackendActive},
		{yes, nil, nil, lb.BackendActive},
		{yes, no, yes, lb.BackendActive}, // publishNotReadyAddresses: ready while terminating
		{yes, yes, yes, lb.BackendActive},
		{nil, nil, yes, lb.BackendActive}, // ready nil is ready
		{no, nil, yes, lb.BackendTerminating},
		{no, yes, yes, lb.BackendTerminating},
		{no, no, yes, lb.BackendNotReady},
		{no, nil, nil, lb.BackendNotReady},
		{no, yes, nil, lb.BackendNotReady}, // serving, not terminating, yet not ready
		{no, no, no, lb.BackendNotReady},
	} {
		c := discoveryv1.EndpointConditions{Ready: tc.ready, Serving: tc.serving, Terminating: tc.terminating}
		if got := endpointState(c); got != tc.want {
			t.Errorf("ready=%s serving=%s terminating=%s: %s, want %s",
				showBool(tc.ready), showBool(tc.serving), showBool(tc.terminating), got, tc.want)
		}
	}
}

func showBool(b *bool) string {
	if b == nil {
		return "unset"
	}
	if *b {
		return "true"
	}
	return "false"
}

// The slice, as the conversion and then selection see it: .1, .2
// and .3 take new flows; .4 (not ready, terminating, serving unset) is a
// terminating fallback, listed with weight 0.
func TestReadyEndpointsTakeNewFlowsWhateverTerminatingSays(t *testing.T) {
	_, bs, errs, err := ConvertEndpointSlice(decodeSlice(t, `
metadata: {name: web-1, namespace: default, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{port: 8080}]
endpoints:
- {addresses: [10.0.0.1], conditions: {ready: true, serving: false, terminating: true}}
- {addresses: [10.0.0.2], conditions: {ready: true, serving: true, terminating: true}}
- {addresses: [10.0.0.3], conditions: {ready: true}}
- {addresses: [10.0.0.4], conditions: {ready: false, terminating: true}}
`))
	if err != nil || len(errs) > 0 {
		t.Fatal(err, errs)
	}
	cands := make([]tables.Candidate, len(bs))
	for i := range bs {
		cands[i] = tables.Candidate{Params: &bs[i]}
	}
	fe := lb.FrontendParams{Address: lb.MustParseL3n4Addr("10.96.0.1:80/TCP"), Type: lb.SVCTypeClusterIP}
	var got []string
	for _, r := range tables.SelectBackends(fe, &lb.ServiceParams{}, nil, false, cands) {
		got = append(got, r.String())
	}
	want := []string{"10.0.0.1:8080/TCP", "10.0.0.2:8080/TCP", "10.0.0.3:8080/TCP", "10.0.0.4:8080/TCP (terminating weight=0)"}
	if !slices.Equal(got, want) {
		t.Errorf("selected\n  got  %q\n  want %q", got, want)
	}
}
