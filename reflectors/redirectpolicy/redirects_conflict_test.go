package redirectpolicy

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// Of two policies on one Service, the newer is reported (logged and
// counted) once when it starts waiting, not again at every pod change;
// its row names the older; it takes over when the older goes.
func TestNewerPolicyOnAServiceReportedOnceAndTakesOver(t *testing.T) {
	r, w, db, rows := newPolicyReflector(t)
	svc, slice := kubeDNS()
	older, newer := dnsPolicy("older", time.Unix(1, 0)), dnsPolicy("newer", time.Unix(2, 0))
	r.apply([]event{{Obj: svc}, {Obj: slice}, {Obj: dnsPodObject("a", "10.0.1.1", true, 0)}, {Obj: newer}})
	if n := r.src.Errors(); n != 0 {
		t.Fatalf("%d errors before the conflict", n)
	}
	r.apply([]event{{Obj: older}})
	if n := r.src.Errors(); n != 1 {
		t.Errorf("%d errors once the newer policy waits, want 1", n)
	}
	for _, ready := range []bool{false, true, false, true} {
		r.apply([]event{{Obj: dnsPodObject("a", "10.0.1.1", ready, 0)}})
	}
	if n := r.src.Errors(); n != 1 {
		t.Errorf("%d errors after pod changes, want still 1", n)
	}
	redirectedTo := func() lb.ServiceName {
		fe, _, _ := w.Frontends().Get(db.ReadTxn(), tables.FrontendByAddress.Query(lb.MustParseL3n4Addr("10.96.0.10:53/UDP")))
		return fe.RedirectedTo()
	}
	row, _, _ := rows.Get(db.ReadTxn(), StatusByName.Query("k8s:kube-system/newer"))
	if got := redirectedTo(); got != TargetName("kube-system", "older") || row.LostTo != "kube-system/older" {
		t.Errorf("redirected to %s, newer's row lost to %q: want the older's", got, row.LostTo)
	}
	r.apply([]event{{Obj: older, Deleted: true}})
	row, _, _ = rows.Get(db.ReadTxn(), StatusByName.Query("k8s:kube-system/newer"))
	if got := redirectedTo(); got != TargetName("kube-system", "newer") || row.LostTo != "" {
		t.Errorf("after the older went: redirected to %s, newer's row lost to %q", got, row.LostTo)
	}
	if _, _, found := rows.Get(db.ReadTxn(), StatusByName.Query("k8s:kube-system/older")); found {
		t.Error("the deleted policy's row is still there")
	}
}

// Of three policies on one Service, the two that wait are reported once
// each when they start waiting, not again when the one they lose to
// changes; their rows name the new winner.
func TestLosingPolicyReportedOncePerChangeOfItsOwnState(t *testing.T) {
	r, _, db, rows := newPolicyReflector(t)
	svc, slice := kubeDNS()
	oldest, middle, newest := dnsPolicy("oldest", time.Unix(1, 0)), dnsPolicy("middle", time.Unix(2, 0)), dnsPolicy("newest", time.Unix(3, 0))
	r.apply([]event{{Obj: svc}, {Obj: slice}, {Obj: dnsPodObject("a", "10.0.1.1", true, 0)}, {Obj: oldest}, {Obj: middle}, {Obj: newest}})
	if n := r.src.Errors(); n != 2 {
		t.Fatalf("%d errors with two policies waiting, want 2", n)
	}
	r.apply([]event{{Obj: oldest, Deleted: true}})
	if n := r.src.Errors(); n != 2 {
		t.Errorf("%d errors after the winner went, want still 2 (the newest waits as it did)", n)
	}
	row, _, _ := rows.Get(db.ReadTxn(), StatusByName.Query("k8s:kube-system/newest"))
	if row.LostTo != "kube-system/middle" {
		t.Errorf("newest's row lost to %q, want kube-system/middle", row.LostTo)
	}
	r.apply([]event{{Obj: middle, Deleted: true}})
	r.apply([]event{{Obj: oldest}})
	if n := r.src.Errors(); n != 3 {
		t.Errorf("%d errors once the newest waits again, want 3", n)
	}
}

// A losing policy moved to another Service where it loses too is
// reported again: a conflict of its own, on another Service.
func TestLosingPolicyMovedToAnotherContestedServiceIsReported(t *testing.T) {
	r, _, _, _ := newPolicyReflector(t)
	svc, slice := kubeDNS()
	svc2, slice2 := kubeDNS()
	svc2.Name, svc2.Spec.ClusterIP = "dns2", "10.96.0.11"
	slice2.Name, slice2.Labels = "dns2-1", map[string]string{"kubernetes.io/service-name": "dns2"}
	a, b, p := dnsPolicy("a", time.Unix(1, 0)), dnsPolicy("b", time.Unix(2, 0)), dnsPolicy("p", time.Unix(3, 0))
	b.Spec.RedirectFrontend.ServiceMatcher = &ServiceMatcher{ServiceName: "dns2", Namespace: "kube-system"}
	r.apply([]event{{Obj: svc}, {Obj: slice}, {Obj: svc2}, {Obj: slice2}, {Obj: dnsPodObject("x", "10.0.1.1", true, 0)}, {Obj: a}, {Obj: b}, {Obj: p}})
	if n := r.src.Errors(); n != 1 {
		t.Fatalf("%d errors, want 1 (p loses to a)", n)
	}
	p2 := dnsPolicy("p", time.Unix(3, 0))
	p2.Spec.RedirectFrontend.ServiceMatcher = &ServiceMatcher{ServiceName: "dns2", Namespace: "kube-system"}
	r.apply([]event{{Obj: p2}})
	if n := r.src.Errors(); n != 2 {
		t.Errorf("%d errors after p moved to dns2 where it loses to b: want 2 (a new conflict on another Service)", n)
	}
}

// A pod whose labels change leaves the policies that selected it for
// those that select it now, whether they select by matchLabels or by
// matchExpressions alone.
func TestPodRelabelMovesItBetweenPolicies(t *testing.T) {
	r, _, db, rows := newPolicyReflector(t)
	byLabels := func(name, app string) *Policy {
		p := dnsPolicy(name, time.Unix(1, 0))
		p.Spec.RedirectFrontend = Frontend{AddressMatcher: &AddressMatcher{
			IP: "169.254.0." + app[len(app)-1:], ToPorts: []PortInfo{{Port: "53", Protocol: "UDP"}}}}
		p.Spec.RedirectBackend.LocalEndpointSelector = metav1.LabelSelector{MatchLabels: map[string]string{"app": app, "tier": "dns"}}
		return p
	}
	byExpr := byLabels("expr", "app-3")
	byExpr.Spec.RedirectBackend.LocalEndpointSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"app-2"}}}}
	pod := func(app string) *corev1.Pod {
		p := dnsPodObject("a", "10.0.1.1", true, 0)
		p.Labels = map[string]string{"app": app, "tier": "dns"}
		return p
	}
	pods := func(name string) int {
		row, _, _ := rows.Get(db.ReadTxn(), StatusByName.Query("k8s:kube-system/"+name))
		return len(row.Pods)
	}
	r.apply([]event{{Obj: pod("app-1")}, {Obj: byLabels("one", "app-1")}, {Obj: byLabels("two", "app-2")}, {Obj: byExpr}})
	if pods("one") != 1 || pods("two") != 0 || pods("expr") != 0 {
		t.Errorf("app-1: policies one, two, expr select %d, %d, %d pods, want 1, 0, 0", pods("one"), pods("two"), pods("expr"))
	}
	r.apply([]event{{Obj: pod("app-2")}})
	if pods("one") != 0 || pods("two") != 1 || pods("expr") != 1 {
		t.Errorf("app-2: policies one, two, expr select %d, %d, %d pods, want 0, 1, 1", pods("one"), pods("two"), pods("expr"))
	}
}

// At the synced marker the rows of this source's policies that the
// reflector does not hold (left by a run that started over) go, and
// other sources' rows stay.
func TestSyncRemovesStalePolicyRows(t *testing.T) {
	r, _, db, rows := newPolicyReflector(t)
	txn := db.WriteTxn(rows)
	for _, row := range []*Status{
		{Source: lb.SourceK8s, Name: "kube-system/gone"},
		{Source: lb.SourceFile, Name: "kube-system/gone"},
	} {
		if _, _, err := rows.Insert(txn, row); err != nil {
			t.Fatal(err)
		}
	}
	txn.Commit()
	r.apply([]event{{Obj: dnsPolicy("kept", time.Unix(1, 0))}, {Synced: true}})
	var got []string
	for row := range rows.All(db.ReadTxn()) {
		got = append(got, row.Source.String()+":"+row.Name)
	}
	if want := []string{"file:kube-system/gone", "k8s:kube-system/kept"}; !slices.Equal(got, want) {
		t.Errorf("rows %v, want %v", got, want)
	}
}
