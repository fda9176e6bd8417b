package k8s

import (
	"testing"
	"time"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors/redirectpolicy"
	"github.com/lbstate/lbstate/tables"
)

// Of two policies on one Service, the newer is reported (logged and
// counted) once when it starts waiting, not again at every pod change;
// its row names the older; it takes over when the older goes.
func TestNewerPolicyOnAServiceReportedOnceAndTakesOver(t *testing.T) {
	r, w, db, rows := newPolicyReflector(t)
	svc, slice := kubeDNS()
	older, newer := dnsPolicy("older", time.Unix(1, 0)), dnsPolicy("newer", time.Unix(2, 0))
	r.apply([]event{{obj: svc}, {obj: slice}, {obj: dnsPodObject("a", "10.0.1.1", true, 0)}, {obj: newer}})
	if n := r.src.Errors(); n != 0 {
		t.Fatalf("%d errors before the conflict", n)
	}
	r.apply([]event{{obj: older}})
	if n := r.src.Errors(); n != 1 {
		t.Errorf("%d errors once the newer policy waits, want 1", n)
	}
	for _, ready := range []bool{false, true, false, true} {
		r.apply([]event{{obj: dnsPodObject("a", "10.0.1.1", ready, 0)}})
	}
	if n := r.src.Errors(); n != 1 {
		t.Errorf("%d errors after pod changes, want still 1", n)
	}
	redirectedTo := func() lb.ServiceName {
		fe, _, _ := w.Frontends().Get(db.ReadTxn(), tables.FrontendByAddress.Query(lb.MustParseL3n4Addr("10.96.0.10:53/UDP")))
		return fe.RedirectedTo
	}
	row, _, _ := rows.Get(db.ReadTxn(), redirectpolicy.StatusByName.Query("k8s:kube-system/newer"))
	if got := redirectedTo(); got != redirectpolicy.TargetName("kube-system", "older") || row.LostTo != "kube-system/older" {
		t.Errorf("redirected to %s, newer's row lost to %q: want the older's", got, row.LostTo)
	}
	r.apply([]event{{obj: older, deleted: true}})
	row, _, _ = rows.Get(db.ReadTxn(), redirectpolicy.StatusByName.Query("k8s:kube-system/newer"))
	if got := redirectedTo(); got != redirectpolicy.TargetName("kube-system", "newer") || row.LostTo != "" {
		t.Errorf("after the older went: redirected to %s, newer's row lost to %q", got, row.LostTo)
	}
	if _, _, found := rows.Get(db.ReadTxn(), redirectpolicy.StatusByName.Query("k8s:kube-system/older")); found {
		t.Error("the deleted policy's row is still there")
	}
}
