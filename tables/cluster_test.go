package tables

import (
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
)

// A cluster that disconnects takes exactly its backends: another
// cluster's, and the local source's at the same service, stay.
func TestDeleteSourceClusterRemovesOnlyThatClustersBackends(t *testing.T) {
	w := newTestWriter(t)
	web := lb.NewServiceName("ns", "web")
	be := func(addr string, cluster uint32) lb.BackendParams {
		return lb.BackendParams{Address: lb.MustParseL3n4Addr(addr), Weight: lb.DefaultBackendWeight, ClusterID: cluster}
	}
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		if err := w.UpsertService(txn, lb.ServiceParams{Name: web, Source: lb.SourceK8s,
			Annotations: map[string]string{lb.AnnotationGlobal: "true"},
			Frontends:   []lb.FrontendParams{{Address: lb.MustParseL3n4Addr("10.96.0.1:80/TCP"), Type: lb.SVCTypeClusterIP}},
		}); err != nil {
			return err
		}
		if err := w.SetBackends(txn, web, lb.SourceK8s, be("10.0.0.1:80/TCP", 0)); err != nil {
			return err
		}
		return w.UpsertBackends(txn, web, lb.SourceKVStore, be("10.2.0.1:80/TCP", 2), be("10.3.0.1:80/TCP", 3))
	})
	mustWrite(t, w, func(txn statedb.WriteTxn) error { return w.DeleteSourceCluster(txn, lb.SourceKVStore, 2) })

	txn := w.db.ReadTxn()
	var got []string
	for fe := range w.FrontendsOf(txn, web) {
		for _, b := range fe.Backends {
			got = append(got, selRefString(b))
		}
	}
	want := []string{"10.0.0.1:80/TCP", "10.3.0.1:80/TCP cluster=3"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("backends after cluster 2 left: %q, want %q", got, want)
	}
	if _, _, found := w.Backends().Get(txn, BackendByAddress.Query(lb.MustParseL3n4Addr("10.2.0.1:80/TCP"))); found {
		t.Error("cluster 2's backend row is still there")
	}
	wtxn := w.WriteTxn()
	defer wtxn.Abort()
	if err := w.DeleteSourceCluster(wtxn, lb.Source(99), 2); err == nil {
		t.Error("an unknown source was accepted")
	}
}
