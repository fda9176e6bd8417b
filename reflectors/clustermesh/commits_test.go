package clustermesh

import (
	"log/slog"
	"slices"
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/tables"
)

// Two clusters' writes queued together are one transaction: the service
// they both change is refreshed once, its frontend's history has one
// record naming both clusters, and each cluster's backends are there.
func TestClustersWaitingToWriteShareOneTransaction(t *testing.T) {
	db, w, src := localWebAndSource(t)
	web := lb.NewServiceName("default", "web")
	fe := lb.MustParseL3n4Addr("10.96.0.4:80/TCP")
	before, _ := w.History().Records(tables.HistoryQuery{Frontend: fe})

	request := func(cluster string, id uint32, addr string) *writeRequest {
		b := lb.BackendParams{Address: lb.MustParseL3n4Addr(addr), Weight: lb.DefaultBackendWeight, ClusterID: id}.WithPortNames("http")
		return &writeRequest{
			cluster: cluster, id: id, written: map[lb.ServiceName]struct{}{},
			next:  map[lb.ServiceName][]lb.BackendParams{web: {b}},
			cause: &tables.Cause{Source: "kvstore", Name: cluster},
			done:  make(chan struct{}),
		}
	}
	g := &commits{src: src}
	r2, r3 := request("c2", 2, "10.2.0.1:8080/TCP"), request("c3", 3, "10.3.0.1:8080/TCP")
	g.apply([]*writeRequest{r2, r3})
	for _, r := range []*writeRequest{r2, r3} {
		select {
		case <-r.done:
		default:
			t.Fatalf("%s: not done", r.cluster)
		}
		if r.err != nil || len(r.rejected) > 0 {
			t.Fatalf("%s: %v, rejected %v", r.cluster, r.err, r.rejected)
		}
	}
	if got, want := backendsOf(w, db, "web")[1], "10.96.0.4:80/TCP -> 10.0.0.1:8080/TCP,10.2.0.1:8080/TCP,10.3.0.1:8080/TCP"; got != want {
		t.Fatalf("web: %s, want %s", got, want)
	}
	recs, _ := w.History().Records(tables.HistoryQuery{Frontend: fe})
	recs = recs[len(before):]
	if len(recs) != 1 {
		t.Fatalf("%d records of %s for one group, want 1: %+v", len(recs), fe, recs)
	}
	var names []string
	for _, c := range recs[0].Causes {
		names = append(names, c.Name)
	}
	if slices.Sort(names); !slices.Equal(names, []string{"c2", "c3"}) {
		t.Errorf("the record's causes name %v, want c2 and c3", names)
	}
}

// Clusters that replace their backends of one service in one group are
// one Writer call for that service (one look at its backends), with the
// same result as one call each: each cluster's backends replaced, the
// others' and the local ones kept. If one cluster's set is invalid, only
// that cluster's write is rejected and what it had stays; the others'
// are applied.
func TestClustersReplacingOneServiceTogetherKeepEachOthersBackends(t *testing.T) {
	db, w, src := localWebAndSource(t)
	web := lb.NewServiceName("default", "web")
	be := func(addr string, id uint32) lb.BackendParams {
		return lb.BackendParams{Address: lb.MustParseL3n4Addr(addr), Weight: lb.DefaultBackendWeight, ClusterID: id}.WithPortNames("http")
	}
	written := map[uint32]map[lb.ServiceName]struct{}{2: {}, 3: {}, 4: {}}
	request := func(cluster string, id uint32, bs ...lb.BackendParams) *writeRequest {
		return &writeRequest{
			cluster: cluster, id: id, written: written[id],
			next:  map[lb.ServiceName][]lb.BackendParams{web: bs},
			cause: &tables.Cause{Source: "kvstore", Name: cluster},
			done:  make(chan struct{}),
		}
	}
	apply := func(rs ...*writeRequest) {
		t.Helper()
		(&commits{src: src}).apply(rs)
		for _, r := range rs {
			if r.err != nil {
				t.Fatalf("%s: %v", r.cluster, r.err)
			}
			if !r.rejected[web] {
				written[r.id][web] = struct{}{}
			}
		}
	}
	apply(request("c2", 2, be("10.2.0.1:8080/TCP", 2), be("10.2.0.2:8080/TCP", 2)),
		request("c3", 3, be("10.3.0.1:8080/TCP", 3)),
		request("c4", 4, be("10.4.0.1:8080/TCP", 4)))
	// c2 moves one backend, c3 moves its only one to c2's old address
	// (released by c2 in the same call), c4 keeps its own.
	apply(request("c2", 2, be("10.2.0.2:8080/TCP", 2), be("10.2.0.3:8080/TCP", 2)),
		request("c3", 3, be("10.2.0.1:8080/TCP", 3)),
		request("c4", 4, be("10.4.0.1:8080/TCP", 4)))
	want := "10.96.0.4:80/TCP -> 10.0.0.1:8080/TCP,10.2.0.1:8080/TCP,10.2.0.2:8080/TCP,10.2.0.3:8080/TCP,10.4.0.1:8080/TCP"
	if got := backendsOf(w, db, "web")[1]; got != want {
		t.Fatalf("web: %s, want %s", got, want)
	}
	moved, _, _ := w.Backends().Get(db.ReadTxn(), tables.BackendByAddress.Query(lb.MustParseL3n4Addr("10.2.0.1:8080/TCP")))
	if inst, _ := moved.Instance(web, lb.SourceKVStore); inst == nil || inst.Params.ClusterID != 3 {
		t.Fatalf("10.2.0.1:8080/TCP: instance %+v, want cluster 3's", inst)
	}
	if n := src.Errors(); n != 0 {
		t.Fatalf("%d rejected, want none", n)
	}

	// c3's set carries another cluster's ID: c3 keeps what it had, c2
	// and c4 replace theirs.
	bad, c2, c4 := request("c3", 3, be("10.3.0.9:8080/TCP", 2)), request("c2", 2, be("10.2.0.3:8080/TCP", 2)), request("c4", 4)
	apply(c2, bad, c4)
	if !bad.rejected[web] || c2.rejected[web] || c4.rejected[web] || src.Errors() != 1 {
		t.Fatalf("rejected: c3 %v, c2 %v, c4 %v, %d counted; want c3's alone", bad.rejected, c2.rejected, c4.rejected, src.Errors())
	}
	want = "10.96.0.4:80/TCP -> 10.0.0.1:8080/TCP,10.2.0.1:8080/TCP,10.2.0.3:8080/TCP"
	if got := backendsOf(w, db, "web")[1]; got != want {
		t.Fatalf("web after c3's invalid set: %s, want %s", got, want)
	}
}

// A group's writes end as they would one after another, in the order
// the clusters queued them: of two clusters that offer one backend
// address, the one that queued last owns it (the rule in
// docs/differences.md), whether or not it had backends of the service
// before. (A cluster new to the service was upserted ahead of the
// group's replacements, so the earlier cluster won.)
func TestGroupWritesEndAsWrittenInQueueOrder(t *testing.T) {
	web := lb.NewServiceName("default", "web")
	x := lb.MustParseL3n4Addr("10.9.0.1:8080/TCP")
	request := func(cluster string, id uint32, written map[lb.ServiceName]struct{}) *writeRequest {
		b := lb.BackendParams{Address: x, Weight: lb.DefaultBackendWeight, ClusterID: id}.WithPortNames("http")
		return &writeRequest{
			cluster: cluster, id: id, written: written,
			next:  map[lb.ServiceName][]lb.BackendParams{web: {b}},
			cause: &tables.Cause{Source: "kvstore", Name: cluster},
			done:  make(chan struct{}),
		}
	}
	owner := func(grouped bool) uint32 {
		db, w, src := localWebAndSource(t)
		g := &commits{src: src}
		// c2 has x already; c3 has nothing of web yet.
		c2 := map[lb.ServiceName]struct{}{}
		g.apply([]*writeRequest{request("c2", 2, c2)})
		c2[web] = struct{}{}
		group := []*writeRequest{request("c2", 2, c2), request("c3", 3, map[lb.ServiceName]struct{}{})}
		if grouped {
			g.apply(group)
		} else {
			for _, r := range group {
				g.apply([]*writeRequest{r})
			}
		}
		for _, r := range group {
			if r.err != nil || len(r.rejected) > 0 {
				t.Fatalf("%s: %v, rejected %v", r.cluster, r.err, r.rejected)
			}
		}
		b, _, found := w.Backends().Get(db.ReadTxn(), tables.BackendByAddress.Query(x))
		if !found {
			t.Fatalf("%s: gone", x)
		}
		inst, _ := b.Instance(web, lb.SourceKVStore)
		return inst.Params.ClusterID
	}
	if got, alone := owner(true), owner(false); got != 3 || alone != 3 {
		t.Errorf("%s belongs to cluster %d written as a group, %d one by one; want cluster 3's, which queued last", x, got, alone)
	}
}

// localWebAndSource returns tables with the local global service web
// (localWeb) and the kvstore source that writes into them.
func localWebAndSource(t *testing.T) (*statedb.DB, *tables.Writer, *reflectors.Source) {
	t.Helper()
	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	localWeb(t, w, true, "web")
	src, err := reflectors.NewSource(w, lb.SourceKVStore, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	return db, w, src
}
