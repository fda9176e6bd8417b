package tables

import (
	"fmt"
	"slices"
	"strings"
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

// SetClusterBackends replaces one cluster's backends of a service: the
// ones it no longer lists go, another cluster's and the local source's
// stay, and a backend of another cluster is refused with nothing changed.
func TestSetClusterBackendsReplacesOnlyThatClustersBackends(t *testing.T) {
	w := newTestWriter(t)
	web := lb.NewServiceName("ns", "web")
	be := func(addr string, cluster uint32) lb.BackendParams {
		return lb.BackendParams{Address: lb.MustParseL3n4Addr(addr), Weight: lb.DefaultBackendWeight, ClusterID: cluster}
	}
	backends := func() []string {
		var out []string
		for b := range w.BackendsOf(w.db.ReadTxn(), web) {
			for _, inst := range b.Instances {
				out = append(out, fmt.Sprintf("%s %s %d", b.Address, inst.Source, inst.Params.ClusterID))
			}
		}
		return out
	}
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		if err := w.SetBackends(txn, web, lb.SourceK8s, be("10.0.0.1:80/TCP", 0)); err != nil {
			return err
		}
		if err := w.SetClusterBackends(txn, web, lb.SourceKVStore, 3, be("10.3.0.1:80/TCP", 3)); err != nil {
			return err
		}
		return w.SetClusterBackends(txn, web, lb.SourceKVStore, 2, be("10.2.0.1:80/TCP", 2), be("10.2.0.2:80/TCP", 2))
	})
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		return w.SetClusterBackends(txn, web, lb.SourceKVStore, 2, be("10.2.0.2:80/TCP", 2), be("10.2.0.3:80/TCP", 2))
	})
	want := []string{"10.0.0.1:80/TCP k8s 0", "10.2.0.2:80/TCP kvstore 2", "10.2.0.3:80/TCP kvstore 2", "10.3.0.1:80/TCP kvstore 3"}
	if got := backends(); !slices.Equal(got, want) {
		t.Fatalf("after cluster 2 replaced its backends: %q, want %q", got, want)
	}
	txn := w.WriteTxn()
	err := w.SetClusterBackends(txn, web, lb.SourceKVStore, 2, be("10.3.0.9:80/TCP", 3))
	txn.Abort()
	if err == nil || !strings.Contains(err.Error(), "backend 10.3.0.9:80/TCP: clusterID 3, want 2") {
		t.Fatalf("a backend of another cluster: %v", err)
	}
	mustWrite(t, w, func(txn statedb.WriteTxn) error { return w.SetClusterBackends(txn, web, lb.SourceKVStore, 2) })
	if got, want := backends(), []string{"10.0.0.1:80/TCP k8s 0", "10.3.0.1:80/TCP kvstore 3"}; !slices.Equal(got, want) {
		t.Fatalf("after cluster 2 listed none: %q, want %q", got, want)
	}
}

// Through the Writer, the affinity follows the local backends' state and
// the annotation: remote backends take new flows once the last local one
// terminates, and lose them again when it is back; affinity none, later,
// uses both.
func TestClusterAffinityFollowsLocalBackendsAndAnnotation(t *testing.T) {
	w := newTestWriter(t)
	web := lb.NewServiceName("ns", "web")
	local := lb.BackendParams{Address: lb.MustParseL3n4Addr("10.0.0.1:80/TCP"), Weight: lb.DefaultBackendWeight}
	remote := lb.BackendParams{Address: lb.MustParseL3n4Addr("10.2.0.1:80/TCP"), Weight: lb.DefaultBackendWeight, ClusterID: 2}
	declare := func(affinity string) {
		mustWrite(t, w, func(txn statedb.WriteTxn) error {
			return w.UpsertService(txn, lb.ServiceParams{Name: web, Source: lb.SourceK8s,
				Annotations: map[string]string{lb.AnnotationGlobal: "true", lb.AnnotationAffinity: affinity},
				Frontends:   []lb.FrontendParams{{Address: lb.MustParseL3n4Addr("10.96.0.1:80/TCP"), Type: lb.SVCTypeClusterIP}},
			})
		})
	}
	selected := func() []string {
		var got []string
		for fe := range w.FrontendsOf(w.db.ReadTxn(), web) {
			for _, b := range fe.Backends {
				got = append(got, selRefString(b))
			}
		}
		return got
	}
	expect := func(what string, want ...string) {
		t.Helper()
		if got := selected(); !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", what, got, want)
		}
	}
	declare("local")
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		if err := w.SetBackends(txn, web, lb.SourceK8s, local); err != nil {
			return err
		}
		return w.UpsertBackends(txn, web, lb.SourceKVStore, remote)
	})
	expect("local affinity", "10.0.0.1:80/TCP", "10.2.0.1:80/TCP (weight=0) cluster=2")

	terminating := local
	terminating.State = lb.BackendTerminating
	mustWrite(t, w, func(txn statedb.WriteTxn) error { return w.SetBackends(txn, web, lb.SourceK8s, terminating) })
	expect("the local backend terminates", "10.2.0.1:80/TCP cluster=2", "10.0.0.1:80/TCP (terminating weight=0)")

	mustWrite(t, w, func(txn statedb.WriteTxn) error { return w.SetBackends(txn, web, lb.SourceK8s, local) })
	expect("a local backend is back", "10.0.0.1:80/TCP", "10.2.0.1:80/TCP (weight=0) cluster=2")

	declare("remote")
	expect("remote affinity", "10.2.0.1:80/TCP cluster=2", "10.0.0.1:80/TCP (weight=0)")
	declare("none")
	expect("no affinity", "10.0.0.1:80/TCP", "10.2.0.1:80/TCP cluster=2")
}

// Remote is a property of the backend (its cluster ID), not of the source
// that wrote it: another cluster's backend written by a local source is
// left out of a service that is not global, and this cluster's backend
// written by the kvstore source is selected like any other. A service
// declared by the kvstore source is not global for that: only its
// annotation makes it so.
func TestRemoteIsDecidedByTheBackendsClusterNotItsSource(t *testing.T) {
	web := lb.NewServiceName("ns", "web")
	be := func(addr string, cluster uint32) lb.BackendParams {
		return lb.BackendParams{Address: lb.MustParseL3n4Addr(addr), Weight: lb.DefaultBackendWeight, ClusterID: cluster}
	}
	selected := func(w *Writer) []string {
		var got []string
		for fe := range w.FrontendsOf(w.db.ReadTxn(), web) {
			for _, b := range fe.Backends {
				got = append(got, selRefString(b))
			}
		}
		return got
	}
	for _, tc := range []struct {
		name        string
		declaredBy  lb.Source
		annotations map[string]string
		want        []string
	}{
		{"not global", lb.SourceK8s, nil, []string{"10.0.0.1:80/TCP", "10.0.0.2:80/TCP"}},
		{"not global, declared by kvstore", lb.SourceKVStore, nil, []string{"10.0.0.1:80/TCP", "10.0.0.2:80/TCP"}},
		{"global", lb.SourceK8s, map[string]string{lb.AnnotationGlobal: "true"},
			[]string{"10.0.0.1:80/TCP", "10.0.0.2:80/TCP", "10.2.0.1:80/TCP cluster=2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newTestWriter(t)
			mustWrite(t, w, func(txn statedb.WriteTxn) error {
				if err := w.UpsertService(txn, lb.ServiceParams{Name: web, Source: tc.declaredBy, Annotations: tc.annotations,
					Frontends: []lb.FrontendParams{{Address: lb.MustParseL3n4Addr("10.96.0.1:80/TCP"), Type: lb.SVCTypeClusterIP}},
				}); err != nil {
					return err
				}
				// A local source writes one backend of this cluster and
				// one of cluster 2; kvstore writes one of this cluster.
				if err := w.SetBackends(txn, web, lb.SourceAPI, be("10.0.0.1:80/TCP", 0), be("10.2.0.1:80/TCP", 2)); err != nil {
					return err
				}
				return w.SetBackends(txn, web, lb.SourceKVStore, be("10.0.0.2:80/TCP", 0))
			})
			if got := selected(w); !slices.Equal(got, tc.want) {
				t.Errorf("selected %q, want %q", got, tc.want)
			}
		})
	}
}
