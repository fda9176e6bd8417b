package redirectpolicy

import (
	"slices"
	"testing"
	"time"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// A pod that lacks a port the policy names, and a frontend port whose
// name the backend ports lack, leave out that pod or that port, not the
// policy (as in Cilium); each is logged and counted once, when it
// appears, not again when another problem comes or a pod changes. (The
// problems were once all counted again whenever one of them changed.)
func TestRedirectPolicySkipsAPodOrPortLackingANameAndCountsItOnce(t *testing.T) {
	r, w, db, rows := newPolicyReflector(t)
	svc, slice := kubeDNS()
	policy := dnsPolicy("lrp", time.Unix(1, 0))
	policy.Spec.RedirectFrontend.ServiceMatcher.ToPorts = []PortInfo{
		{Name: "dns", Port: "53", Protocol: "UDP"}, {Name: "dns-tcp", Port: "53", Protocol: "TCP"}, {Name: "metrics", Port: "9253", Protocol: "TCP"}}
	policy.Spec.RedirectBackend.ToPorts = []PortInfo{
		{Name: "dns", Port: "5353", Protocol: "UDP"}, {Name: "dns-tcp", Port: "5353", Protocol: "TCP"}}
	// dnsPodObject declares the UDP port "dns" only.
	r.apply([]event{{Obj: svc}, {Obj: slice}, {Obj: policy}, {Obj: dnsPodObject("a", "10.0.1.1", true, 0)}})
	if n := r.src.Errors(); n != 2 {
		t.Errorf("%d errors, want 2: pod a lacks dns-tcp, the backend lacks metrics", n)
	}
	redirectedTo := func(addr string) lb.ServiceName {
		fe, _, found := w.Frontends().Get(db.ReadTxn(), tables.FrontendByAddress.Query(lb.MustParseL3n4Addr(addr)))
		if !found {
			t.Fatalf("no frontend %s", addr)
		}
		return fe.RedirectedTo()
	}
	target := TargetName("kube-system", "lrp")
	if got := redirectedTo("10.96.0.10:53/UDP"); got != target {
		t.Errorf("53/UDP redirected to %q, want %s: the policy applies to the port its pod has", got, target)
	}
	if got := redirectedTo("10.96.0.10:53/TCP"); !got.IsZero() {
		t.Errorf("53/TCP redirected to %s: no pod has dns-tcp", got)
	}
	row, _, _ := rows.Get(db.ReadTxn(), StatusByName.Query("k8s:kube-system/lrp"))
	wantProblems := []string{
		`policy kube-system/lrp: spec.redirectFrontend.serviceMatcher.toPorts[2].name: "metrics" has no port of that name in spec.redirectBackend.toPorts: port not redirected`,
		`policy kube-system/lrp: spec.redirectBackend.toPorts[1].name: pod kube-system/a has no TCP container port "dns-tcp"`,
	}
	if row == nil || !row.Valid || row.Error != "" || !slices.Equal(row.Problems, wantProblems) {
		t.Fatalf("row %+v, want valid with problems %q", row, wantProblems)
	}

	r.apply([]event{{Obj: dnsPodObject("b", "10.0.1.2", true, 0)}})
	if n := r.src.Errors(); n != 3 {
		t.Errorf("%d errors after pod b came, want 3: b's problem only", n)
	}
	for _, ready := range []bool{false, true, false, true} {
		r.apply([]event{{Obj: dnsPodObject("a", "10.0.1.1", ready, 0)}})
	}
	if n := r.src.Errors(); n != 3 {
		t.Errorf("%d errors after pod a's changes, want still 3", n)
	}
	r.apply([]event{{Obj: dnsPodObject("b", "10.0.1.2", true, 0), Deleted: true}})
	if n := r.src.Errors(); n != 3 {
		t.Errorf("%d errors after pod b went, want still 3", n)
	}
}
