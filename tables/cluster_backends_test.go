package tables

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

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

// A set that lists a backend another cluster held before the call takes
// it over as SetClusterBackends in turn would: the earlier set updates
// the row, and the later set of the cluster that held it finds it no
// longer that cluster's and leaves it. The row is not deleted and made
// anew, which would drop its health verdict (an unhealthy backend would
// get traffic again), and the history names only the cluster that
// changed the service.
func TestSetClustersBackendsKeepsARowAnEarlierSetTookOver(t *testing.T) {
	web := lb.NewServiceName("ns", "web")
	fe := lb.MustParseL3n4Addr("10.96.0.1:80/TCP")
	x := lb.MustParseL3n4Addr("10.9.0.1:80/TCP")
	be := func(cluster uint32) lb.BackendParams {
		return lb.BackendParams{Address: x, Weight: lb.DefaultBackendWeight, ClusterID: cluster}
	}
	verdict := lb.HealthVerdict{Healthy: false, Since: time.Unix(1700000000, 0), LastError: "connection refused"}
	c2, c3 := &Cause{Source: "kvstore", Name: "c2"}, &Cause{Source: "kvstore", Name: "c3"}
	setUp := func() *Writer {
		w := newTestWriter(t)
		mustWrite(t, w, func(txn statedb.WriteTxn) error {
			if err := w.UpsertService(txn, lb.ServiceParams{Name: web, Source: lb.SourceK8s,
				Annotations: map[string]string{lb.AnnotationGlobal: "true"},
				Frontends:   []lb.FrontendParams{{Address: fe, Type: lb.SVCTypeClusterIP}},
			}); err != nil {
				return err
			}
			if err := w.SetClusterBackends(txn, web, lb.SourceKVStore, 3, be(3)); err != nil {
				return err
			}
			return w.SetBackendVerdict(txn, x, verdict)
		})
		return w
	}
	w, ref := setUp(), setUp()
	before, _ := w.History().Records(HistoryQuery{Frontend: fe})
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		return w.SetClustersBackends(txn, web, lb.SourceKVStore,
			ClusterBackends{ClusterID: 2, Backends: []lb.BackendParams{be(2)}, Cause: c2},
			ClusterBackends{ClusterID: 3, Cause: c3})
	})
	mustWrite(t, ref, func(txn statedb.WriteTxn) error {
		ref.SetCause(txn, c2)
		if err := ref.SetClusterBackends(txn, web, lb.SourceKVStore, 2, be(2)); err != nil {
			return err
		}
		ref.SetCause(txn, c3)
		return ref.SetClusterBackends(txn, web, lb.SourceKVStore, 3)
	})
	b, _, found := w.Backends().Get(w.db.ReadTxn(), BackendByAddress.Query(x))
	if !found {
		t.Fatalf("%s: gone", x)
	}
	if inst, _ := b.Instance(web, lb.SourceKVStore); inst == nil || inst.Params.ClusterID != 2 {
		t.Errorf("%s: instance %+v, want cluster 2's", x, inst)
	}
	if !b.Verdict().Equal(verdict) {
		t.Errorf("%s: verdict %+v, want %+v kept", x, b.Verdict(), verdict)
	}
	if err := compareTables(w, w.db.ReadTxn(), ref, ref.db.ReadTxn()); err != nil {
		t.Errorf("one call and one call per cluster differ: %v", err)
	}
	recs, _ := w.History().Records(HistoryQuery{Frontend: fe})
	recs = recs[len(before):]
	if len(recs) != 1 || len(recs[0].Causes) != 1 || recs[0].Causes[0].Name != "c2" {
		t.Errorf("records of %s: %+v, want one caused by c2 alone", fe, recs)
	}
}
