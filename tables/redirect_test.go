package tables

import (
	"fmt"
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
)

// Names and addresses of the redirect and input tests.
var (
	nameA    = lb.NewServiceName("default", "a")
	nameB    = lb.NewServiceName("default", "b")
	nameC    = lb.NewServiceName("default", "c")
	vip1     = lb.MustParseL3n4Addr("10.96.0.1:80/TCP")
	vip2     = lb.MustParseL3n4Addr("10.96.0.2:80/TCP")
	backend1 = lb.MustParseL3n4Addr("10.0.0.1:80/TCP")
	backend2 = lb.MustParseL3n4Addr("10.0.0.2:80/TCP")
	backend3 = lb.MustParseL3n4Addr("10.0.0.3:80/TCP")
)

// tablesState prints the frontends, the conflicts and the redirects.
func tablesState(w *Writer) string {
	txn := w.db.ReadTxn()
	var redirects string
	for s := range w.Services().All(txn) {
		for _, r := range s.Redirects() {
			redirects += fmt.Sprintf("%s -> %s\n", s.Name, r)
		}
	}
	return frontendsDump(w, txn) + conflictsDump(w, txn) + redirects
}

// redirectTargets returns a Writer with service a (frontend vip1) and the
// backends of b and c, services a may be redirected to.
func redirectTargets(t *testing.T) *Writer {
	w := newTestWriter(t)
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		if err := w.UpsertService(txn, lb.ServiceParams{Name: nameA, Source: lb.SourceK8s,
			Frontends: []lb.FrontendParams{{Address: vip1, Type: lb.SVCTypeClusterIP}}}); err != nil {
			return err
		}
		if err := w.UpsertBackends(txn, nameB, lb.SourceK8s, lb.BackendParams{Address: backend2, Weight: 100}); err != nil {
			return err
		}
		return w.UpsertBackends(txn, nameC, lb.SourceK8s, lb.BackendParams{Address: backend3, Weight: 100})
	})
	return w
}

// Two sources setting a redirect on one service give the same tables in
// either order: the higher-priority source's redirect is in force.
// (Redirects were once not kept per source: the last one set won.)
func TestRedirectPriorityIndependentOfOrder(t *testing.T) {
	apiRedirect := lb.Redirect{Source: lb.SourceAPI, To: nameB}
	lrpRedirect := lb.Redirect{Source: lb.SourceRedirect, To: nameC}

	w1 := redirectTargets(t)
	mustWrite(t, w1, func(txn statedb.WriteTxn) error { return w1.SetRedirect(txn, nameA, apiRedirect) })
	mustWrite(t, w1, func(txn statedb.WriteTxn) error { return w1.SetRedirect(txn, nameA, lrpRedirect) })

	w2 := redirectTargets(t)
	mustWrite(t, w2, func(txn statedb.WriteTxn) error { return w2.SetRedirect(txn, nameA, lrpRedirect) })
	mustWrite(t, w2, func(txn statedb.WriteTxn) error { return w2.SetRedirect(txn, nameA, apiRedirect) })

	if s1, s2 := tablesState(w1), tablesState(w2); s1 != s2 {
		t.Fatalf("same inputs, different order, different tables:\n--- api then redirect\n%s--- redirect then api\n%s", s1, s2)
	}
}

// A redirect set by one source survives another source setting and then
// dropping its own: only the source that set a redirect can clear it.
// (Before redirects were kept per source, the other source's deletion
// took this one with it.)
func TestRedirectClearedOnlyByItsSource(t *testing.T) {
	w := redirectTargets(t)
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		return w.SetRedirect(txn, nameA, lb.Redirect{Source: lb.SourceAPI, To: nameB})
	})
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		return w.SetRedirect(txn, nameA, lb.Redirect{Source: lb.SourceRedirect, To: nameC})
	})
	mustWrite(t, w, func(txn statedb.WriteTxn) error { return w.DeleteSource(txn, lb.SourceRedirect) })

	txn := w.db.ReadTxn()
	fe, _, _ := w.Frontends().Get(txn, FrontendByAddress.Query(vip1))
	if fe.RedirectedTo() != nameB {
		t.Fatalf("after DeleteSource(redirect): frontend redirected to %q, want the api source's redirect to %s (api never cleared it)", fe.RedirectedTo(), nameB)
	}
}
