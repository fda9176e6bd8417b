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
