package tables

import (
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
)

// The sources of one feed share its identity: a sweep of one kind of
// contribution (a redirect policies' source sweeping its redirects, the
// services source its declarations) leaves the others' rows of that
// identity alone.
func TestSweepSourceOfRemovesOnlyItsKind(t *testing.T) {
	w := newTestWriter(t)
	web, target := lb.NewServiceName("ns", "web"), lb.NewServiceName("ns", "dns:lrp")
	be := lb.BackendParams{Address: lb.MustParseL3n4Addr("10.0.1.1:53/UDP"), Weight: lb.DefaultBackendWeight}
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		if err := w.UpsertService(txn, lb.ServiceParams{Name: web, Source: lb.SourceK8s, Frontends: []lb.FrontendParams{
			{Address: lb.MustParseL3n4Addr("10.96.0.1:53/UDP"), Type: lb.SVCTypeClusterIP}}}); err != nil {
			return err
		}
		if err := w.SetBackends(txn, target, lb.SourceK8s, be); err != nil {
			return err
		}
		if err := w.SetRedirect(txn, web, lb.Redirect{Source: lb.SourceK8s, To: target, ClusterIPOnly: true}); err != nil {
			return err
		}
		return w.SetRoute(txn, web, lb.Route{Source: lb.SourceK8s, Backends: []lb.RouteBackend{{Service: target, Weight: 1}}})
	})
	service := func(name lb.ServiceName) *lb.Service {
		svc, _, _ := w.Services().Get(w.db.ReadTxn(), ServiceByName.Query(name))
		return svc
	}
	// Declarations of every service but web: the target's backends go,
	// web's declaration, redirect and route stay.
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		return w.SweepSourceOf(txn, lb.SourceK8s, Declarations, func(n lb.ServiceName) bool { return n == web })
	})
	if svc := service(web); len(svc.Params) != 1 || len(svc.Redirects()) != 1 || len(svc.Routes()) != 1 {
		t.Fatalf("web after a sweep of declarations: %d declarations, %d redirects, %d routes, want 1 of each", len(svc.Params), len(svc.Redirects()), len(svc.Routes()))
	}
	if b, _, ok := w.Backends().Get(w.db.ReadTxn(), BackendByAddress.Query(be.Address)); ok {
		t.Fatalf("the target's backend survived a sweep of its declarations: %v", b.Instances)
	}
	// Redirects of every service: web's goes, its route and declaration stay.
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		return w.SweepSourceOf(txn, lb.SourceK8s, Redirects, func(lb.ServiceName) bool { return false })
	})
	if svc := service(web); len(svc.Params) != 1 || len(svc.Redirects()) != 0 || len(svc.Routes()) != 1 {
		t.Fatalf("web after a sweep of redirects: %d declarations, %d redirects, %d routes, want 1, 0, 1", len(svc.Params), len(svc.Redirects()), len(svc.Routes()))
	}
}
