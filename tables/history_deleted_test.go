package tables

import (
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
)

// A deleted frontend's history entry names the service whose row it was
// and the cause of that service's deletion, also when another service
// claimed the address first in the same batch (flush finds the row's
// service by the record that claimed the address, and must not take the
// first claimer's), and when the deleted service keeps its row for a
// redirect (DeleteService copies the row then; it copies none when
// nothing is left of it).
func TestHistoryDeletedFrontendNamesItsServiceAndItsCause(t *testing.T) {
	web, canary, target := lb.NewServiceName("shop", "web"), lb.NewServiceName("shop", "canary"), lb.NewServiceName("shop", "target")
	fe := lb.MustParseL3n4Addr("10.96.0.20:80/TCP")
	declare := func(name lb.ServiceName) lb.ServiceParams {
		return lb.ServiceParams{Name: name, Source: lb.SourceK8s, Frontends: []lb.FrontendParams{{Address: fe, Type: lb.SVCTypeClusterIP}}}
	}
	cause := func(name string) *Cause { return &Cause{Source: "k8s", Kind: "Service", Name: name} }
	for _, tc := range []struct {
		name     string
		redirect bool // web has a redirect, which keeps its row
		batch    func(w *Writer, txn statedb.WriteTxn) error
	}{
		{"only declaration", false, func(w *Writer, txn statedb.WriteTxn) error {
			w.SetCause(txn, cause("shop/web"))
			return w.DeleteService(txn, web, lb.SourceK8s)
		}},
		{"another service claimed the address first", false, func(w *Writer, txn statedb.WriteTxn) error {
			w.SetCause(txn, cause("shop/canary"))
			if err := w.UpsertService(txn, declare(canary)); err != nil {
				return err
			}
			w.SetCause(txn, cause("shop/web"))
			if err := w.DeleteService(txn, web, lb.SourceK8s); err != nil {
				return err
			}
			w.SetCause(txn, cause("shop/canary deleted"))
			return w.DeleteService(txn, canary, lb.SourceK8s)
		}},
		{"redirected service", true, func(w *Writer, txn statedb.WriteTxn) error {
			w.SetCause(txn, cause("shop/web"))
			return w.DeleteService(txn, web, lb.SourceK8s)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newTestWriter(t)
			mustWrite(t, w, func(txn statedb.WriteTxn) error {
				if err := w.UpsertService(txn, declare(web)); err != nil {
					return err
				}
				if !tc.redirect {
					return nil
				}
				return w.SetRedirect(txn, web, lb.Redirect{Source: lb.SourceRedirect, To: target})
			})
			mustWrite(t, w, func(txn statedb.WriteTxn) error {
				return w.Batch(txn, func() error { return tc.batch(w, txn) })
			})
			txn := w.db.ReadTxn()
			if _, _, found := w.Frontends().Get(txn, FrontendByAddress.Query(fe)); found {
				t.Fatalf("frontend %s left after its services went", fe)
			}
			recs, _ := w.History().Records(HistoryQuery{Frontend: fe})
			if len(recs) != 2 {
				t.Fatalf("want 2 records of %s (created, deleted), got %+v", fe, recs)
			}
			if r := recs[1]; r.Change != "deleted" || r.Service != web || r.Cause != "k8s Service shop/web" {
				t.Errorf("deleted record: change %q service %s cause %q, want deleted, %s, %q", r.Change, r.Service, r.Cause, web, "k8s Service shop/web")
			}
			row, _, found := w.Services().Get(txn, ServiceByName.Query(web))
			if found != tc.redirect {
				t.Fatalf("service row of %s found=%v, want %v (kept only for its redirect)", web, found, tc.redirect)
			}
			if found && (len(row.Params) != 0 || len(row.Redirects()) != 1 || row.Redirects()[0].To != target) {
				t.Errorf("kept row of %s: %d declarations, redirects %v; want none, the redirect to %s", web, len(row.Params), row.Redirects(), target)
			}
		})
	}
}
