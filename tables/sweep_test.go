package tables

import (
	"slices"
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
)

// SweepSource removes a source's declarations and backends of the
// services it does not keep, and nothing of other sources or kept
// services.
func TestSweepSourceRemovesOnlyWhatIsNotKept(t *testing.T) {
	w := newTestWriter(t)
	keep, drop := lb.NewServiceName("ns", "keep"), lb.NewServiceName("ns", "drop")
	be := func(addr string) lb.BackendParams {
		return lb.BackendParams{Address: lb.MustParseL3n4Addr(addr), Weight: lb.DefaultBackendWeight}
	}
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		for i, name := range []lb.ServiceName{keep, drop} {
			for _, src := range []lb.Source{lb.SourceK8s, lb.SourceFile} {
				if err := w.UpsertService(txn, lb.ServiceParams{Name: name, Source: src, Frontends: []lb.FrontendParams{
					{Address: lb.MustParseL3n4Addr([]string{"10.96.0.1:80/TCP", "10.96.0.2:80/TCP"}[i]), Type: lb.SVCTypeClusterIP},
				}}); err != nil {
					return err
				}
			}
			if err := w.SetBackends(txn, name, lb.SourceK8s, be("10.0.0.1:80/TCP")); err != nil {
				return err
			}
		}
		return w.SetBackends(txn, drop, lb.SourceFile, be("10.0.0.2:80/TCP"))
	})
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		return w.SweepSource(txn, lb.SourceK8s, func(n lb.ServiceName) bool { return n == keep })
	})
	txn := w.db.ReadTxn()
	sources := func(name lb.ServiceName) (out []lb.Source) {
		svc, _, _ := w.Services().Get(txn, ServiceByName.Query(name))
		for _, p := range svc.Params {
			out = append(out, p.Source)
		}
		return out
	}
	if got := sources(keep); !slices.Equal(got, []lb.Source{lb.SourceFile, lb.SourceK8s}) {
		t.Errorf("kept service declared by %v, want file and k8s", got)
	}
	if got := sources(drop); !slices.Equal(got, []lb.Source{lb.SourceFile}) {
		t.Errorf("swept service declared by %v, want file only", got)
	}
	shared, _, _ := w.Backends().Get(txn, BackendByAddress.Query(lb.MustParseL3n4Addr("10.0.0.1:80/TCP")))
	if len(shared.Instances) != 1 || shared.Instances[0].Service != keep {
		t.Errorf("shared backend's instances %v, want only the kept service's", shared.Instances)
	}
	wtxn := w.WriteTxn()
	defer wtxn.Abort()
	if err := w.SweepSource(wtxn, lb.SourceK8s, nil); err == nil {
		t.Error("a nil keep was accepted")
	}
}
