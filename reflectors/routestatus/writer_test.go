package routestatus

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors/routes"
)

// condition returns entry's condition of type typ.
func condition(t *testing.T, entry gwv1.RouteParentStatus, typ gwv1.RouteConditionType) metav1.Condition {
	t.Helper()
	for _, c := range entry.Conditions {
		if c.Type == string(typ) {
			return c
		}
	}
	t.Fatalf("no %s condition in %+v", typ, entry)
	return metav1.Condition{}
}

// ours returns the entries of lbstate's controller.
func ours(ps []gwv1.RouteParentStatus) []gwv1.RouteParentStatus {
	var out []gwv1.RouteParentStatus
	for _, p := range ps {
		if p.ControllerName == ControllerName {
			out = append(out, p)
		}
	}
	return out
}

// waitResolvedRefs waits until route ns/name has one entry of ours whose
// ResolvedRefs has reason, and returns it.
func waitResolvedRefs(t *testing.T, h *harness, ns, name string, reason gwv1.RouteConditionReason) gwv1.RouteParentStatus {
	t.Helper()
	var entry gwv1.RouteParentStatus
	eventually(t, "route "+ns+"/"+name+": ResolvedRefs "+string(reason), func() bool {
		ps := ours(h.parents(ns, name))
		if len(ps) != 1 {
			return false
		}
		entry = ps[0]
		for _, c := range entry.Conditions {
			if c.Type == string(gwv1.RouteConditionResolvedRefs) && c.Reason == string(reason) {
				return true
			}
		}
		return false
	})
	return entry
}

func TestRouteOnExistingServicesIsAcceptedWithResolvedRefsAtItsGeneration(t *testing.T) {
	h := newHarness(t)
	h.service("ns", "web")
	h.service("ns", "a")
	parent := serviceParent("web")
	parent.Port = ptr(gwv1.PortNumber(80))
	h.route(httpRoute("ns", "r", 3, []gwv1.ParentReference{parent}, backend("", "a")))
	h.lead(h.writer("a", nil))

	entry := waitResolvedRefs(t, h, "ns", "r", gwv1.RouteReasonResolvedRefs)
	if !apiequality.Semantic.DeepEqual(entry.ParentRef, parent) {
		t.Errorf("parentRef %+v, want the spec's %+v", entry.ParentRef, parent)
	}
	acc, res := condition(t, entry, gwv1.RouteConditionAccepted), condition(t, entry, gwv1.RouteConditionResolvedRefs)
	if acc.Status != metav1.ConditionTrue || acc.Reason != string(gwv1.RouteReasonAccepted) || acc.ObservedGeneration != 3 {
		t.Errorf("Accepted %+v, want True/Accepted at generation 3", acc)
	}
	if res.Status != metav1.ConditionTrue || res.ObservedGeneration != 3 || res.LastTransitionTime.IsZero() {
		t.Errorf("ResolvedRefs %+v, want True at generation 3 with a transition time", res)
	}
}

func TestMissingBackendIsBackendNotFoundUntilTheServiceAppears(t *testing.T) {
	h := newHarness(t)
	h.service("ns", "web")
	h.route(httpRoute("ns", "r", 1, []gwv1.ParentReference{serviceParent("web")}, backend("", "a"), backend("", "b")))
	h.service("ns", "a")
	h.lead(h.writer("a", nil))

	entry := waitResolvedRefs(t, h, "ns", "r", gwv1.RouteReasonBackendNotFound)
	res := condition(t, entry, gwv1.RouteConditionResolvedRefs)
	if res.Status != metav1.ConditionFalse || !strings.Contains(res.Message, "spec.rules[0].backendRefs[1]: service ns/b not found") {
		t.Errorf("ResolvedRefs %+v, want False naming backendRefs[1]", res)
	}
	if acc := condition(t, entry, gwv1.RouteConditionAccepted); acc.Status != metav1.ConditionTrue {
		t.Errorf("Accepted %+v, want True (the split applies; one ref does not resolve)", acc)
	}
	h.service("ns", "b") // the services table changes: the route is written again
	waitResolvedRefs(t, h, "ns", "r", gwv1.RouteReasonResolvedRefs)
}

func TestCrossNamespaceBackendWithoutGrantIsRefNotPermitted(t *testing.T) {
	h := newHarness(t)
	h.service("ns", "web")
	h.service("other", "a")
	h.route(httpRoute("ns", "r", 1, []gwv1.ParentReference{serviceParent("web")}, backend("other", "a")))
	h.lead(h.writer("a", nil))

	entry := waitResolvedRefs(t, h, "ns", "r", gwv1.RouteReasonRefNotPermitted)
	if res := condition(t, entry, gwv1.RouteConditionResolvedRefs); !strings.Contains(res.Message, "no ReferenceGrant") {
		t.Errorf("ResolvedRefs message %q, want the missing grant named", res.Message)
	}
	h.grant("other", "ns")
	waitResolvedRefs(t, h, "ns", "r", gwv1.RouteReasonResolvedRefs)
}

func TestBackendOfAnotherKindIsInvalidKind(t *testing.T) {
	h := newHarness(t)
	h.service("ns", "web")
	ref := backend("", "bucket")
	ref.Group, ref.Kind = ptr(gwv1.Group("storage.example.com")), ptr(gwv1.Kind("Bucket"))
	h.route(httpRoute("ns", "r", 1, []gwv1.ParentReference{serviceParent("web")}, ref))
	h.lead(h.writer("a", nil))

	waitResolvedRefs(t, h, "ns", "r", gwv1.RouteReasonInvalidKind)
}

// Parents lbstate cannot apply are reported per parentRef: a Service in
// another namespace (a consumer route) and a younger route on the same
// Service are not accepted; a Gateway parent gets no entry of lbstate's.
func TestEachServiceParentRefGetsItsOwnAcceptedReason(t *testing.T) {
	h := newHarness(t)
	h.service("ns", "web")
	h.service("ns", "a")
	h.route(httpRoute("ns", "old", 1, []gwv1.ParentReference{serviceParent("web")}, backend("", "a")))
	other := serviceParent("web")
	other.Namespace = ptr(gwv1.Namespace("elsewhere"))
	gateway := gwv1.ParentReference{Name: "gw"}
	young := httpRoute("ns", "young", 1, []gwv1.ParentReference{gateway, serviceParent("web"), other}, backend("", "a"))
	young.CreationTimestamp = metav1.NewTime(young.CreationTimestamp.AddDate(0, 0, 1))
	h.route(young)
	h.lead(h.writer("a", nil))

	var ps []gwv1.RouteParentStatus
	eventually(t, "two entries of ours on route young", func() bool { ps = ours(h.parents("ns", "young")); return len(ps) == 2 })
	for i, want := range []struct {
		ref    gwv1.ParentReference
		reason string
	}{{serviceParent("web"), routes.ReasonConflicted}, {other, string(gwv1.RouteReasonUnsupportedValue)}} {
		acc := condition(t, ps[i], gwv1.RouteConditionAccepted)
		if !apiequality.Semantic.DeepEqual(ps[i].ParentRef, want.ref) || acc.Status != metav1.ConditionFalse || acc.Reason != want.reason {
			t.Errorf("entry %d: %+v, Accepted %+v; want %+v not accepted: %s", i, ps[i].ParentRef, acc, want.ref, want.reason)
		}
	}
}

func TestOtherControllersEntriesAreKeptAndOursForRemovedParentsDropped(t *testing.T) {
	h := newHarness(t)
	h.service("ns", "web")
	h.service("ns", "a")
	gateway := gwv1.ParentReference{Name: "gw"}
	theirs := gwv1.RouteParentStatus{ParentRef: gateway, ControllerName: "example.net/gateway-controller",
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: 1,
			LastTransitionTime: metav1.Unix(1700000000, 0)}}}
	stale := gwv1.RouteParentStatus{ParentRef: serviceParent("gone"), ControllerName: ControllerName,
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: 1,
			LastTransitionTime: metav1.Unix(1700000000, 0)}}}
	rt := httpRoute("ns", "r", 2, []gwv1.ParentReference{gateway, serviceParent("web")}, backend("", "a"))
	rt.Status.Parents = []gwv1.RouteParentStatus{stale, theirs}
	h.route(rt)
	h.lead(h.writer("a", nil))

	waitResolvedRefs(t, h, "ns", "r", gwv1.RouteReasonResolvedRefs)
	ps := h.parents("ns", "r")
	if len(ps) != 2 || !apiequality.Semantic.DeepEqual(ps[0], theirs) || !apiequality.Semantic.DeepEqual(ps[1].ParentRef, serviceParent("web")) {
		t.Errorf("status.parents %+v, want the gateway controller's entry as it was, then ours for web (not for gone)", ps)
	}
}

// A status already as it should be is never written again: not when the
// route's row changes without changing it, not when a backend Service
// changes, and not by a new writer, which lists the routes once (not a
// read per route) when it starts.
func TestUnchangedStatusIsNotRewritten(t *testing.T) {
	h := newHarness(t)
	h.service("ns", "web")
	h.service("ns", "a")
	h.route(httpRoute("ns", "r", 1, []gwv1.ParentReference{serviceParent("web")}, backend("", "a")))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.writer("a", nil).Lead(ctx) }()
	waitResolvedRefs(t, h, "ns", "r", gwv1.RouteReasonResolvedRefs)

	h.plan() // the same rows, inserted again
	txn := h.w.WriteTxn()
	if err := h.w.UpsertService(txn, lb.ServiceParams{Name: lb.NewServiceName("ns", "a"), Source: lb.SourceK8s, SessionAffinity: true}); err != nil {
		t.Fatal(err)
	}
	txn.Commit() // backend a's row changes; it still exists
	h.route(httpRoute("ns", "marker", 1, []gwv1.ParentReference{serviceParent("web2")}, backend("", "a")))
	waitResolvedRefs(t, h, "ns", "marker", gwv1.RouteReasonResolvedRefs) // the queue went past r's changes (markers are on parents of their own)
	if n := h.updates("ns", "r"); n != 1 {
		t.Errorf("route r's status written %d times, want 1", n)
	}
	cancel()
	<-done

	reads := len(h.dyn.Actions())
	h.lead(h.writer("b", nil))
	h.route(httpRoute("ns", "marker2", 1, []gwv1.ParentReference{serviceParent("web3")}, backend("", "a")))
	waitResolvedRefs(t, h, "ns", "marker2", gwv1.RouteReasonResolvedRefs) // after it read r and marker
	if n, m := h.updates("ns", "r"), h.updates("ns", "marker"); n != 1 || m != 1 {
		t.Errorf("after a new writer read them, routes r and marker written %d and %d times, want 1 and 1", n, m)
	}
	for _, a := range h.dyn.Actions()[reads:] {
		if g, ok := a.(k8stesting.GetAction); ok && (g.GetName() == "r" || g.GetName() == "marker") {
			t.Errorf("the new writer read route %s alone; want it known from its list", g.GetName())
		}
	}
}

// A route some of whose rules cannot apply at L4 is accepted and
// partially invalid (the spec's "Dropped Rule"); one none of whose rules
// can is not accepted, and not partially invalid.
func TestDroppedRulesMakeAnAcceptedRoutePartiallyInvalid(t *testing.T) {
	h := newHarness(t)
	h.service("ns", "web")
	h.service("ns", "a")
	header := gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{{Headers: []gwv1.HTTPHeaderMatch{{Name: "x-canary", Value: "1"}}}},
		BackendRefs: []gwv1.HTTPBackendRef{backend("", "a")}}
	partly := httpRoute("ns", "partly", 1, []gwv1.ParentReference{serviceParent("web")}, backend("", "a"))
	partly.Spec.Rules = append([]gwv1.HTTPRouteRule{header}, partly.Spec.Rules...)
	h.route(partly)
	none := httpRoute("ns", "none", 1, []gwv1.ParentReference{serviceParent("api")})
	none.Spec.Rules = []gwv1.HTTPRouteRule{header}
	h.route(none)
	h.lead(h.writer("a", nil))

	entry := waitResolvedRefs(t, h, "ns", "partly", gwv1.RouteReasonResolvedRefs)
	if acc := condition(t, entry, gwv1.RouteConditionAccepted); acc.Status != metav1.ConditionTrue {
		t.Errorf("partly: Accepted %+v, want True", acc)
	}
	pi := condition(t, entry, gwv1.RouteConditionPartiallyInvalid)
	if pi.Status != metav1.ConditionTrue || pi.Reason != string(gwv1.RouteReasonUnsupportedValue) ||
		!strings.HasPrefix(pi.Message, "Dropped Rule") || !strings.Contains(pi.Message, "spec.rules[0].matches[0].headers") {
		t.Errorf("partly: PartiallyInvalid %+v, want True/UnsupportedValue, \"Dropped Rule...\" naming rule 0's headers", pi)
	}

	entry = waitResolvedRefs(t, h, "ns", "none", gwv1.RouteReasonResolvedRefs)
	if acc := condition(t, entry, gwv1.RouteConditionAccepted); acc.Status != metav1.ConditionFalse || acc.Reason != string(gwv1.RouteReasonUnsupportedValue) {
		t.Errorf("none: Accepted %+v, want False/UnsupportedValue", acc)
	}
	if len(entry.Conditions) != 2 {
		t.Errorf("none: conditions %+v, want Accepted and ResolvedRefs only", entry.Conditions)
	}
}

// A write that meets a newer version of the route (a Conflict) reads the
// route again and writes on it.
func TestConflictingWriteReadsTheRouteAgainAndRetries(t *testing.T) {
	h := newHarness(t)
	h.service("ns", "web")
	h.service("ns", "a")
	h.route(httpRoute("ns", "r", 1, []gwv1.ParentReference{serviceParent("web")}, backend("", "a")))
	var conflicts atomic.Int64
	h.dyn.PrependReactor("update", "httproutes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" && conflicts.Add(1) == 1 {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: gwv1.GroupName, Resource: "httproutes"}, "r", errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	w := h.writer("a", nil)
	h.lead(w)

	waitResolvedRefs(t, h, "ns", "r", gwv1.RouteReasonResolvedRefs)
	if c, ok := testutil.ToFloat64(w.metrics.writes.WithLabelValues(resultConflict)), testutil.ToFloat64(w.metrics.writes.WithLabelValues(resultWritten)); c != 1 || ok != 1 {
		t.Errorf("writes: %v conflict, %v written; want 1 and 1", c, ok)
	}
}
