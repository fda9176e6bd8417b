package tables

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/lbstate/lbstate/lb"
)

var (
	histWeb = lb.NewServiceName("shop", "web")
	histFE  = lb.MustParseL3n4Addr("10.96.0.10:80/TCP")
	histB1  = lb.MustParseL3n4Addr("10.0.1.1:8080/TCP")
	histB2  = lb.MustParseL3n4Addr("10.0.1.2:8080/TCP")
)

func histService(t testing.TB, w *Writer, txn statedb.WriteTxn, backends ...lb.L3n4Addr) {
	t.Helper()
	err := w.UpsertService(txn, lb.ServiceParams{Name: histWeb, Source: lb.SourceK8s,
		Frontends: []lb.FrontendParams{{Address: histFE, Type: lb.SVCTypeClusterIP}}})
	if err != nil {
		t.Fatal(err)
	}
	var params []lb.BackendParams
	for _, a := range backends {
		params = append(params, lb.BackendParams{Address: a, Weight: 1})
	}
	if err := w.SetBackends(txn, histWeb, lb.SourceK8s, params...); err != nil {
		t.Fatal(err)
	}
}

func TestHistoryEntryCommitsAndAbortsWithTheTableChange(t *testing.T) {
	w := newTestWriter(t)
	sliceCause := &Cause{Source: "k8s", Kind: "EndpointSlice", Name: "shop/web-abc", Version: "resourceVersion 4711"}

	txn := w.WriteTxn()
	w.SetCause(txn, sliceCause)
	histService(t, w, txn, histB1, histB2)
	txn.Abort()
	if recs, _ := w.History().Records(HistoryQuery{}); len(recs) != 0 {
		t.Fatalf("aborted transaction left %d history records: %+v", len(recs), recs)
	}
	if n := w.Frontends().NumObjects(w.db.ReadTxn()); n != 0 {
		t.Fatalf("aborted transaction left %d frontends", n)
	}

	txn = w.WriteTxn()
	w.SetCause(txn, sliceCause)
	histService(t, w, txn, histB1, histB2)
	// Not visible before the commit.
	if recs, _ := w.History().Records(HistoryQuery{}); len(recs) != 0 {
		t.Fatalf("records before the commit: %+v", recs)
	}
	txn.Commit()
	recs, _ := w.History().Records(HistoryQuery{})
	if len(recs) != 1 {
		t.Fatalf("want 1 record after the commit, got %+v", recs)
	}
	r := recs[0]
	if r.Frontend != histFE || r.Change != "created" || r.Cause != "k8s EndpointSlice shop/web-abc resourceVersion 4711" {
		t.Fatalf("record: %+v", r)
	}
	if len(r.Added) != 2 || !strings.HasPrefix(r.Added[0], histB1.String()) {
		t.Fatalf("added: %q", r.Added)
	}
	if _, _, found := w.Frontends().Get(w.db.ReadTxn(), FrontendByAddress.Query(histFE)); !found {
		t.Fatal("committed frontend missing")
	}
}

func TestHistorySaysWhichCauseRemovedABackend(t *testing.T) {
	w := newTestWriter(t)
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		histService(t, w, txn, histB1, histB2)
		return nil
	})
	// A batch of several objects: the cause of each call goes with the
	// service it changed.
	other := lb.NewServiceName("shop", "other")
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		return w.BatchFor(txn, &Cause{Source: "k8s", Kind: "Service", Name: "shop/other"}, func() error {
			if err := w.UpsertService(txn, lb.ServiceParams{Name: other, Source: lb.SourceK8s,
				Frontends: []lb.FrontendParams{{Address: lb.MustParseL3n4Addr("10.96.0.11:80/TCP"), Type: lb.SVCTypeClusterIP}}}); err != nil {
				return err
			}
			w.SetCause(txn, &Cause{Source: "k8s", Kind: "EndpointSlice", Name: "shop/web-abc", Version: "resourceVersion 12"})
			return w.SetBackends(txn, histWeb, lb.SourceK8s, lb.BackendParams{Address: histB1, Weight: 1})
		})
	})
	recs, _ := w.History().Records(HistoryQuery{Frontend: histFE})
	if len(recs) != 2 {
		t.Fatalf("want 2 records of %s, got %+v", histFE, recs)
	}
	r := recs[1]
	if r.Cause != "k8s EndpointSlice shop/web-abc resourceVersion 12" || len(r.Removed) != 1 || !strings.HasPrefix(r.Removed[0], histB2.String()) {
		t.Fatalf("why did %s leave %s: %+v", histB2, histFE, r)
	}
	if recs[0].Cause != UnknownCause {
		t.Fatalf("a call without a cause: %q", recs[0].Cause)
	}
	if recs, _ := w.History().Records(HistoryQuery{Service: other}); len(recs) != 1 || recs[0].Cause != "k8s Service shop/other" {
		t.Fatalf("records of %s: %+v", other, recs)
	}
}

func TestHistoryEvictsTheOldestBeyondItsMemoryCap(t *testing.T) {
	w := newTestWriter(t)
	w.history = NewHistory(4096)
	w.readCurrentRows()
	addrs := []lb.L3n4Addr{histB1, histB2}
	for i := range 40 {
		mustWrite(t, w, func(txn statedb.WriteTxn) error {
			histService(t, w, txn, addrs[:1+i%2]...)
			return nil
		})
	}
	st := w.History().Stats()
	if st.Bytes > 4096 || st.Entries == 0 || st.Evicted == 0 || uint64(st.Entries)+st.Evicted != 40 {
		t.Fatalf("stats after 40 changes under a 4096-byte cap: %+v", st)
	}
	recs, _ := w.History().Records(HistoryQuery{})
	if len(recs) != st.Entries || recs[len(recs)-1].Seq != 40 || recs[0].Seq != uint64(41-st.Entries) {
		t.Fatalf("kept %d records, seqs %d..%d; want the newest", len(recs), recs[0].Seq, recs[len(recs)-1].Seq)
	}
	if !slices.IsSortedFunc(recs, func(a, b HistoryRecord) int { return int(a.Seq) - int(b.Seq) }) {
		t.Fatal("records out of order")
	}
}

func TestHistoryOffKeepsNothing(t *testing.T) {
	w := newTestWriter(t)
	w.history = NewHistory(0)
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		histService(t, w, txn, histB1)
		return nil
	})
	if recs, _ := w.History().Records(HistoryQuery{}); len(recs) != 0 {
		t.Fatalf("history off kept %+v", recs)
	}
}

func TestHistoryRecordsSinceKeepsTheLaterOnes(t *testing.T) {
	w := newTestWriter(t)
	mustWrite(t, w, func(txn statedb.WriteTxn) error { histService(t, w, txn, histB1); return nil })
	mustWrite(t, w, func(txn statedb.WriteTxn) error { histService(t, w, txn, histB2); return nil })
	all, _ := w.History().Records(HistoryQuery{})
	if len(all) != 2 {
		t.Fatalf("records: %+v", all)
	}
	later, _ := w.History().Records(HistoryQuery{Since: all[1].Time})
	after, _ := w.History().Records(HistoryQuery{After: all[0].Seq})
	if len(later) != 1 || later[0].Seq != all[1].Seq || len(after) != 1 || after[0].Seq != all[1].Seq {
		t.Fatalf("since %v: %+v; after %d: %+v", all[1].Time, later, all[0].Seq, after)
	}
}

// The journal keeps only the row before each change; the row after is the
// next change's row before, or the table's. Each record still says only
// its own change, whatever the reconciler wrote back between, and
// whichever records a read picks.
func TestHistoryRecordSaysItsOwnChangeOnly(t *testing.T) {
	w := newTestWriter(t)
	histB3 := lb.MustParseL3n4Addr("10.0.1.3:8080/TCP")
	writeBack := func() { // the reconciler's status write-back: a new row, no entry
		txn := w.db.WriteTxn(w.t.frontends)
		fe, _, _ := w.t.frontends.Get(txn, FrontendByAddress.Query(histFE))
		fe = fe.Clone()
		fe.ID = 7
		if _, _, err := w.t.frontends.Insert(txn, fe.SetStatus(reconciler.StatusDone())); err != nil {
			t.Fatal(err)
		}
		txn.Commit()
	}
	for _, backends := range [][]lb.L3n4Addr{{histB1}, {histB1, histB2}, {histB2, histB3}} {
		mustWrite(t, w, func(txn statedb.WriteTxn) error {
			histService(t, w, txn, backends...)
			return nil
		})
		writeBack()
	}
	want := []struct{ change, added, removed string }{
		{"created", histB1.String(), ""},
		{"changed", histB2.String(), ""},
		{"changed", histB3.String(), histB1.String()},
	}
	check := func(recs []HistoryRecord, want []struct{ change, added, removed string }) {
		t.Helper()
		if len(recs) != len(want) {
			t.Fatalf("want %d records, got %+v", len(want), recs)
		}
		for i, r := range recs {
			w := want[i]
			ok := r.Change == w.change && len(r.Changed) == 0 &&
				(w.added == "" && len(r.Added) == 0 || len(r.Added) == 1 && strings.HasPrefix(r.Added[0], w.added)) &&
				(w.removed == "" && len(r.Removed) == 0 || len(r.Removed) == 1 && strings.HasPrefix(r.Removed[0], w.removed))
			if !ok {
				t.Errorf("record %d: want %s +%s -%s, got %s +%q -%q changed %q", r.Seq, w.change, w.added, w.removed, r.Change, r.Added, r.Removed, r.Changed)
			}
		}
	}
	recs, _ := w.History().Records(HistoryQuery{Frontend: histFE})
	check(recs, want)
	if recs[0].Outcome.State != OutcomeSuperseded || recs[2].Outcome.State != OutcomeDone {
		t.Errorf("outcomes: %+v, %+v", recs[0].Outcome, recs[2].Outcome)
	}
	recs, _ = w.History().Records(HistoryQuery{Frontend: histFE, After: recs[0].Seq, Limit: 1})
	check(recs, want[2:])
	recs, _ = w.History().Records(HistoryQuery{Frontend: histFE, Limit: 2})
	check(recs, want[1:])

	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		return w.DeleteService(txn, histWeb, lb.SourceK8s)
	})
	recs, _ = w.History().Records(HistoryQuery{Frontend: histFE})
	if len(recs) != 4 {
		t.Fatalf("want 4 records after the delete, got %+v", recs)
	}
	check(recs[:3], want)
	if r := recs[3]; r.Change != "deleted" || len(r.Removed) != 2 || len(r.Added) != 0 || r.Outcome.State != OutcomeRemoved {
		t.Errorf("delete record: %+v", r)
	}
}

// A change whose row before is larger than the journal's cap is kept
// without it, saying so, and the change before it does not take the next
// row it can read for its own.
func TestHistoryChangeOverTheCapKeepsItsPlace(t *testing.T) {
	w := newTestWriter(t)
	w.history = NewHistory(8000)
	w.readCurrentRows()
	many := []lb.L3n4Addr{histB1}
	for i := range 299 {
		many = append(many, lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{10, 0, byte(2 + i/250), byte(i%250 + 1)}), 8080, lb.ScopeExternal))
	}
	for _, backends := range [][]lb.L3n4Addr{{histB1}, many, {histB2}} {
		mustWrite(t, w, func(txn statedb.WriteTxn) error {
			histService(t, w, txn, backends...)
			return nil
		})
	}
	recs, _ := w.History().Records(HistoryQuery{Frontend: histFE})
	if len(recs) != 3 {
		t.Fatalf("want 3 records, got %d: %+v", len(recs), recs)
	}
	if r := recs[1]; len(r.Added) != 0 || len(r.Removed) != 0 || len(r.Changed) != 1 || !strings.Contains(r.Changed[0], "row after is not kept") {
		t.Errorf("the change to 300 backends: +%q -%q %q; want it to say its row after is not kept", r.Added, r.Removed, r.Changed)
	}
	if r := recs[2]; r.Change != "changed" || len(r.Changed) != 1 || !strings.Contains(r.Changed[0], "row before is not kept") {
		t.Errorf("the change from 300 backends: %s +%q -%q %q", r.Change, r.Added, r.Removed, r.Changed)
	}
}

// A transaction stages into the buffer the one before it left, and that
// buffer, while spare, keeps no row or cause alive: the ring has its own
// copies. (Staging into a fresh, doubling slice per transaction was the
// Writer's largest allocation.)
func TestHistoryStagingBufferIsReusedAndKeepsNothing(t *testing.T) {
	w := newTestWriter(t)
	cause := &Cause{Source: "k8s", Kind: "Service", Namespace: "shop", Name: "web"}
	txn := w.WriteTxn()
	w.SetCause(txn, cause)
	histService(t, w, txn, histB1)
	txn.Commit()

	h := w.History()
	spare := h.spare
	if cap(spare) == 0 {
		t.Fatal("the committed transaction gave no staging buffer back")
	}
	for i, e := range spare[:cap(spare)] {
		if e != (historyEntry{}) {
			t.Fatalf("spare buffer's entry %d still holds %+v", i, e)
		}
	}
	txn = w.WriteTxn()
	if got := txn.(*journalTxn).staged; cap(got) != cap(spare) || len(got) != 0 {
		t.Fatalf("next transaction stages into len %d cap %d, want the spare buffer (len 0, cap %d)", len(got), cap(got), cap(spare))
	}
	w.SetCause(txn, cause)
	histService(t, w, txn, histB2)
	txn.Commit()
	recs, _ := w.History().Records(HistoryQuery{})
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2 (created, then its backend replaced): %+v", len(recs), recs)
	}
}

// A transaction that staged nothing (a write that changed no frontend:
// a node, a backend verdict that selects the same, an initializer)
// leaves the staging buffer it was given for the next one, also when it
// is committed without an Abort after: dropped, the next transaction
// staged into a fresh slice doubling as it went again.
func TestHistoryStagingBufferOutlivesATransactionThatStagedNothing(t *testing.T) {
	w := newTestWriter(t)
	mustWrite(t, w, func(txn statedb.WriteTxn) error { histService(t, w, txn, histB1); return nil })
	spare := w.History().spare
	if cap(spare) == 0 {
		t.Fatal("the committed transaction gave no staging buffer back")
	}
	txn := w.WriteTxn() // takes the spare buffer, stages nothing
	txn.Commit()
	txn = w.WriteTxn()
	defer txn.Abort()
	if got := txn.(*journalTxn).staged; cap(got) != cap(spare) {
		t.Fatalf("after a transaction that staged nothing, the next stages into cap %d, want the spare buffer's %d", cap(got), cap(spare))
	}
}

// An earlier transaction's records say what it did, whatever the
// transactions after it, committed or aborted, staged into the buffer it
// left: its causes (a third one too, behind a pointer), its change.
func TestHistoryRecordsKeepTheirCausesWhenLaterTransactionsReuseTheStagingBuffer(t *testing.T) {
	w := newTestWriter(t)
	write := func(commit bool, causes ...*Cause) {
		t.Helper()
		txn := w.WriteTxn()
		defer txn.Abort()
		if err := w.Batch(txn, func() error {
			for i, c := range causes {
				w.SetCause(txn, c)
				backends := []lb.L3n4Addr{histB1}
				if i%2 == 1 {
					backends = append(backends, histB2)
				}
				histService(t, w, txn, backends...)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if commit {
			txn.Commit()
		}
	}
	causes := func(source string) []*Cause {
		return []*Cause{{Source: source, Name: "a"}, {Source: source, Name: "b"}, {Source: source, Name: "c"}, {Source: source, Name: "d"}}
	}
	write(true, causes("first")...)
	first, _ := w.History().Records(HistoryQuery{})
	const want = "first a; first b; first c; first d"
	if len(first) != 1 || first[0].Cause != want {
		t.Fatalf("first transaction's records: %+v", first)
	}
	write(false, causes("aborted")...)
	write(true, causes("second")[1:]...)
	recs, _ := w.History().Records(HistoryQuery{})
	if len(recs) != 2 || recs[0].Cause != want || recs[0].Change != "created" || recs[1].Cause != "second b; second c; second d" {
		t.Fatalf("records after an aborted and a committed transaction: %+v", recs)
	}
}
