package clustermesh

import (
	"slices"
	"testing"
	"time"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// "Why did 10.2.0.1 leave default/web's frontend?" The history names the
// remote cluster and that it went stale (no contact for its stale
// timeout), and, for its arrival, the etcd revision it was listed at.
func TestHistoryNamesTheRemoteClusterThatWentStale(t *testing.T) {
	f := newFixture(t, true)
	f.im.initial[0].StaleTimeout = 3 * time.Second
	f.put(ServiceKey("c2", "default", "web"), c2Web)
	f.run(t)
	eventually(t, "connected", webWithC2, func() []string { return backendsOf(f.w, f.db, "web") })
	fe := lb.MustParseL3n4Addr("10.96.0.4:80/TCP")
	recs, _ := f.w.History().Records(tables.HistoryQuery{Frontend: fe})
	if n := len(recs); n == 0 || !slices.Contains(recs[n-1].Added, "10.2.0.1:8080/TCP weight 100 active") ||
		recs[n-1].Causes[0].Source != "kvstore" || recs[n-1].Causes[0].Name != "c2" || recs[n-1].Causes[0].Version == "" {
		t.Fatalf("the remote backends' arrival: %+v", recs)
	}

	f.srv.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for {
		recs, watch := f.w.History().Records(tables.HistoryQuery{Frontend: fe})
		if n := len(recs); n > 0 && slices.Contains(recs[n-1].Removed, "10.2.0.1:8080/TCP weight 100 active") {
			if r := recs[n-1]; r.Cause != "kvstore c2 stale: no contact for 3s (lease expired)" {
				t.Fatalf("why 10.2.0.1 left: %+v", r)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no record of the stale cluster by the deadline: %+v", recs)
		}
		select {
		case <-watch:
		case <-time.After(100 * time.Millisecond):
		}
	}
}
