package k8s

import (
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/tables"
)

// A batch's buffers serve the next batch once written, and keep nothing
// of what they carried meanwhile (declarations, backends, causes: the
// tables have their own), so that a reflector at rest holds no
// Service's leftovers.
func TestBatchBuffersServeTheNextBatchAndKeepNothing(t *testing.T) {
	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := newTestReflector(t, DefaultConfig, w)

	ws := r.prepare([]event{{obj: clusterIPService("a", "10.96.0.1")}, {obj: labelledSlice("a-1", "a", "10.0.0.1")}})
	if len(ws.services) != 2 {
		t.Fatalf("%d service calls, want 2 (declare, backends)", len(ws.services))
	}
	services := ws.services[:cap(ws.services)]
	r.writeOrStop(ws)
	if err := r.failure(); err != nil {
		t.Fatal(err)
	}
	if n := w.Services().NumObjects(db.ReadTxn()); n != 1 {
		t.Fatalf("%d services after the batch, want 1", n)
	}
	for i, c := range services {
		if c.cause != nil || c.backends != nil || c.params.Frontends != nil || !c.name.IsZero() {
			t.Fatalf("written batch's service call %d still holds %+v", i, c)
		}
	}

	next := r.prepare([]event{{obj: clusterIPService("b", "10.96.0.2")}})
	if cap(next.services) != len(services) || &next.services[:1][0] != &services[0] {
		t.Fatalf("next batch's service calls (cap %d) are not the written batch's (cap %d)", cap(next.services), len(services))
	}
	r.writeOrStop(next)
	if n := w.Services().NumObjects(db.ReadTxn()); n != 2 {
		t.Fatalf("%d services after the second batch, want 2", n)
	}
}
