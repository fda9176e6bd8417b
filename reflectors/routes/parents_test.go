package routes

import (
	"testing"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/lbstate/lbstate/lb"
)

// Each parentRef to a Service gets its own outcome, in the order
// written, for the route's status: applied, or why not.
func TestPlanGivesEachServiceParentRefItsOutcome(t *testing.T) {
	old := read(t, `apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata: {name: old, namespace: ns, creationTimestamp: "2026-01-01T00:00:00Z", generation: 4}
spec:
  parentRefs: [{group: "", kind: Service, name: web, port: 80}]
  rules: [{backendRefs: [{name: a, port: 80}, {name: b, namespace: other, port: 80}, {group: x.io, kind: Bucket, name: c}]}]`)
	young := read(t, `apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata: {name: young, namespace: ns, creationTimestamp: "2026-01-02T00:00:00Z"}
spec:
  parentRefs:
  - {name: gw}
  - {group: "", kind: Service, name: web, port: 80}
  - {group: "", kind: Service, name: web, sectionName: http}
  - {group: "", kind: Service, name: web, namespace: elsewhere}
  - {group: "", kind: Service, name: web}
  rules: [{backendRefs: [{name: a, port: 80}]}]`)
	none := read(t, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: none, namespace: ns}
spec:
  parentRefs: [{group: "", kind: Service, name: api}]
  rules: [{matches: [{method: GET}], backendRefs: [{name: a, port: 80}]}]`)
	plan := MakePlan([]*Object{young, none, old}, nil, lb.SourceK8s)
	byName := map[string]Status{}
	for _, st := range plan.Status {
		byName[st.Name] = st
	}

	type outcome struct {
		name     string
		accepted bool
		reason   string
	}
	for _, tt := range []struct {
		route string
		want  []outcome
	}{
		{"old", []outcome{{"web", true, ""}}},
		{"young", []outcome{
			{"web", false, ReasonConflicted},                         // port 80: old is older
			{"web", false, string(gwv1.RouteReasonUnsupportedValue)}, // sectionName
			{"web", false, string(gwv1.RouteReasonUnsupportedValue)}, // a consumer route
			{"web", true, ""}, // every port: it wins those old does not name
		}},
		{"none", []outcome{{"api", false, string(gwv1.RouteReasonUnsupportedValue)}}},
	} {
		got := byName[tt.route].ParentRefs
		if len(got) != len(tt.want) {
			t.Errorf("%s: %d parentRefs %+v, want %d", tt.route, len(got), got, len(tt.want))
			continue
		}
		for i, w := range tt.want {
			if string(got[i].Ref.Name) != w.name || got[i].Accepted != w.accepted || got[i].Reason != w.reason || (!w.accepted && got[i].Message == "") {
				t.Errorf("%s: parentRef %d: %+v, want %+v with a message if not accepted", tt.route, i, got[i], w)
			}
		}
	}
	if young.Parents[0].Ref.Port == nil || *young.Parents[0].Ref.Port != 80 || young.Declined[0].Index != 2 {
		t.Errorf("young's refs as written: %+v, declined %+v", young.Parents, young.Declined)
	}

	st := byName["old"]
	if st.Generation != 4 {
		t.Errorf("old: generation %d, want 4", st.Generation)
	}
	want := []BackendRefStatus{
		{Field: "spec.rules[0].backendRefs[0]", Service: lb.NewServiceName("ns", "a")},
		{Field: "spec.rules[0].backendRefs[1]", Service: lb.NewServiceName("other", "b"), Reason: string(gwv1.RouteReasonRefNotPermitted)},
		{Field: "spec.rules[0].backendRefs[2]", Reason: string(gwv1.RouteReasonInvalidKind)},
	}
	if len(st.BackendRefs) != len(want) {
		t.Fatalf("old: backendRefs %+v, want %+v", st.BackendRefs, want)
	}
	for i, w := range want {
		got := st.BackendRefs[i]
		if got.Field != w.Field || got.Service != w.Service || got.Reason != w.Reason || (w.Reason != "") != (got.Message != "") {
			t.Errorf("old: backendRef %d: %+v, want %+v", i, got, w)
		}
	}
}
