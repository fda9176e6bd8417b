package tables

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
)

// SetClustersBackends leaves the tables as SetClusterBackends called for
// each of its sets in turn does, among random calls of every other kind,
// batched and not: sets that list the same addresses, move a backend
// from one cluster to another, or list none.
func TestSetClustersBackendsEqualsOneCallPerCluster(t *testing.T) {
	playBatches(t, 13000, 6, true, func(g *opGen, w, ref *Writer, txn, refTxn statedb.WriteTxn) (string, error) {
		if g.next(2) != 0 {
			return sameCall(g, w, ref, txn, refTxn)
		}
		name, src := genNames[g.next(len(genNames))], genSources[g.next(len(genSources))]
		var sets []ClusterBackends
		var desc []string
		for _, id := range []uint32{0, 1, 2} {
			if g.next(3) == 0 {
				continue
			}
			bs := g.backends()
			for i := range bs {
				bs[i].ClusterID = id
			}
			sets = append(sets, ClusterBackends{ClusterID: id, Backends: bs})
			desc = append(desc, fmt.Sprintf("%d: %d", id, len(bs)))
		}
		if g.next(2) == 0 {
			slices.Reverse(sets) // any order of clusters
			slices.Reverse(desc)
		}
		call := fmt.Sprintf("SetClustersBackends(%s, %s, %s)", name, src, strings.Join(desc, ", "))
		if err := w.SetClustersBackends(txn, name, src, sets...); err != nil {
			return call, fmt.Errorf("%s: %w", call, err)
		}
		for _, set := range sets {
			if err := ref.SetClusterBackends(refTxn, name, src, set.ClusterID, set.Backends...); err != nil {
				return call, fmt.Errorf("%s (one call per cluster): %w", call, err)
			}
		}
		return call, nil
	})
}

// Invalid input in one set (a backend of another cluster, a cluster
// given twice) is refused with nothing changed, naming the service and
// the backend or field.
func TestSetClustersBackendsRefusesAnInvalidSetWithNothingChanged(t *testing.T) {
	w := newTestWriter(t)
	web := lb.NewServiceName("ns", "web")
	be := func(addr string, cluster uint32) lb.BackendParams {
		return lb.BackendParams{Address: lb.MustParseL3n4Addr(addr), Weight: lb.DefaultBackendWeight, ClusterID: cluster}
	}
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		return w.SetClustersBackends(txn, web, lb.SourceKVStore,
			ClusterBackends{ClusterID: 2, Backends: []lb.BackendParams{be("10.2.0.1:80/TCP", 2)}},
			ClusterBackends{ClusterID: 3, Backends: []lb.BackendParams{be("10.3.0.1:80/TCP", 3)}})
	})
	before := w.db.ReadTxn()
	for _, tc := range []struct {
		sets []ClusterBackends
		want string
	}{
		{[]ClusterBackends{
			{ClusterID: 2, Backends: []lb.BackendParams{be("10.2.0.2:80/TCP", 2)}},
			{ClusterID: 3, Backends: []lb.BackendParams{be("10.3.0.2:80/TCP", 2)}},
		}, "service ns/web (kvstore): backend 10.3.0.2:80/TCP: clusterID 2, want 3"},
		{[]ClusterBackends{
			{ClusterID: 2, Backends: []lb.BackendParams{be("10.2.0.2:80/TCP", 2)}},
			{ClusterID: 2},
		}, "service ns/web (kvstore): clusterID: cluster 2 given twice"},
	} {
		txn := w.WriteTxn()
		err := w.SetClustersBackends(txn, web, lb.SourceKVStore, tc.sets...)
		if !errors.Is(err, ErrInvalid) || err.Error() != tc.want {
			t.Errorf("error %v, want invalid input: %s", err, tc.want)
		}
		if err := compareTables(w, txn, w, before); err != nil {
			t.Errorf("%s: the call changed the tables: %v", tc.want, err)
		}
		txn.Abort()
	}
}

// A history record of a service that several clusters changed in one
// call names each cluster's cause.
func TestSetClustersBackendsRecordsEachClustersCause(t *testing.T) {
	w := newTestWriter(t)
	web := lb.NewServiceName("ns", "web")
	fe := lb.MustParseL3n4Addr("10.96.0.1:80/TCP")
	be := func(addr string, cluster uint32) lb.BackendParams {
		return lb.BackendParams{Address: lb.MustParseL3n4Addr(addr), Weight: lb.DefaultBackendWeight, ClusterID: cluster}
	}
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		return w.UpsertService(txn, lb.ServiceParams{Name: web, Source: lb.SourceK8s,
			Annotations: map[string]string{lb.AnnotationGlobal: "true"},
			Frontends:   []lb.FrontendParams{{Address: fe, Type: lb.SVCTypeClusterIP}},
		})
	})
	before, _ := w.History().Records(HistoryQuery{Frontend: fe})
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		w.SetCause(txn, &Cause{Source: "kvstore", Name: "the transaction's"})
		return w.SetClustersBackends(txn, web, lb.SourceKVStore,
			ClusterBackends{ClusterID: 2, Backends: []lb.BackendParams{be("10.2.0.1:80/TCP", 2)}, Cause: &Cause{Source: "kvstore", Name: "c2"}},
			ClusterBackends{ClusterID: 3, Backends: []lb.BackendParams{be("10.3.0.1:80/TCP", 3)}, Cause: &Cause{Source: "kvstore", Name: "c3"}})
	})
	recs, _ := w.History().Records(HistoryQuery{Frontend: fe})
	recs = recs[len(before):]
	if len(recs) != 1 {
		t.Fatalf("%d records of %s for one call, want 1: %+v", len(recs), fe, recs)
	}
	var names []string
	for _, c := range recs[0].Causes {
		names = append(names, c.Name)
	}
	if slices.Sort(names); !slices.Equal(names, []string{"c2", "c3"}) {
		t.Errorf("the record's causes name %v, want c2 and c3", names)
	}
}
