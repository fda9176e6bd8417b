package tables

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
)

// ReleaseDeleted writes and aborts: the tables, their revisions and
// what their change iterators see stay as they were, watchers are not
// woken, and the Writer writes on afterwards.
func TestReleaseDeletedChangesNothing(t *testing.T) {
	w := newTestWriter(t)
	name := lb.NewServiceName("default", "web")
	fe := lb.MustParseL3n4Addr("10.96.0.1:80/TCP")
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		if err := w.UpsertService(txn, lb.ServiceParams{Name: name, Source: lb.SourceK8s,
			Frontends: []lb.FrontendParams{{Address: fe, Type: lb.SVCTypeClusterIP}}}); err != nil {
			return err
		}
		return w.UpsertBackends(txn, name, lb.SourceK8s, lb.BackendParams{Address: lb.MustParseL3n4Addr("10.0.0.1:80/TCP")})
	})
	// A change iterator makes the tables keep deleted rows: the release
	// then goes through their graveyards too.
	wtxn := w.WriteTxn()
	changes, err := w.Frontends().Changes(wtxn)
	wtxn.Commit()
	if err != nil {
		t.Fatal(err)
	}
	seen := func() (n int) {
		// Until the iterator hands out a watch channel that is open: it
		// returns a closed one after the changes it read.
		for {
			seq, watch := changes.Next(w.db.ReadTxn())
			for range seq {
				n++
			}
			select {
			case <-watch:
			default:
				return n
			}
		}
	}
	if n := seen(); n != 1 {
		t.Fatalf("the change iterator saw %d changes, want the one frontend", n)
	}

	txn := w.db.ReadTxn()
	_, svcWatch := w.Services().AllWatch(txn)
	_, feWatch := w.Frontends().AllWatch(txn)
	_, beWatch := w.Backends().AllWatch(txn)
	revisions := func(txn statedb.ReadTxn) []statedb.Revision {
		return []statedb.Revision{w.Services().Revision(txn), w.Frontends().Revision(txn), w.Backends().Revision(txn)}
	}
	before := revisions(txn)
	w.ReleaseDeleted()
	after := w.db.ReadTxn()
	if got := revisions(after); !slices.Equal(got, before) {
		t.Fatalf("revisions %v after the release, were %v", got, before)
	}
	for name, watch := range map[string]<-chan struct{}{"services": svcWatch, "frontends": feWatch, "backends": beWatch} {
		select {
		case <-watch:
			t.Errorf("the release woke the watchers of %s", name)
		default:
		}
	}
	if n := w.Services().NumObjects(after); n != 1 {
		t.Errorf("%d services after the release, want 1", n)
	}
	if _, _, ok := w.Frontends().Get(after, FrontendByAddress.Query(fe)); !ok {
		t.Errorf("frontend %s gone after the release", fe)
	}
	if n := w.Frontends().NumObjects(after) + w.Backends().NumObjects(after); n != 2 {
		t.Errorf("%d frontends and backends after the release, want 2", n)
	}
	if n := seen(); n != 0 {
		t.Errorf("the change iterator saw %d changes made by the release", n)
	}

	mustWrite(t, w, func(txn statedb.WriteTxn) error { return w.DeleteService(txn, name, lb.SourceK8s) })
	if n := seen(); n != 1 {
		t.Errorf("the change iterator saw %d changes after the delete, want the frontend's deletion", n)
	}
}

// After a change the schedule releases after first, then after twice as
// long each time up to last, then waits for the next change; a change
// starts it over.
func TestReleaseScheduleReleasesAfterChangesUntilQuiet(t *testing.T) {
	w := newTestWriter(t)
	var (
		mu       sync.Mutex
		releases int
		planned  = true
	)
	s := releaseSchedule{first: time.Millisecond, last: 4 * time.Millisecond, released: func(more bool) {
		mu.Lock()
		releases++
		planned = more
		mu.Unlock()
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.run(ctx, w.db, w.t)
	}()
	defer func() {
		cancel()
		<-done
	}()
	// After 1, 1, 2 and 4 ms: 4 releases, the last with none planned. The
	// start counts as a change.
	const perChange = 4
	waitIdle := func(want int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			mu.Lock()
			n, more := releases, planned
			mu.Unlock()
			if n == want && !more {
				return
			}
			if n > want || time.Now().After(deadline) {
				t.Fatalf("%d releases (another planned: %v), want %d and then none", n, more, want)
			}
		}
	}
	waitIdle(perChange)
	for i, svc := range []string{"a", "b"} {
		mustWrite(t, w, func(txn statedb.WriteTxn) error {
			return w.UpsertService(txn, lb.ServiceParams{Name: lb.NewServiceName("default", svc), Source: lb.SourceK8s})
		})
		waitIdle((i + 2) * perChange)
	}
}
