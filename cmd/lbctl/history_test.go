package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/api"
	"github.com/lbstate/lbstate/internal/syncbuf"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

var (
	histWeb = lb.NewServiceName("shop", "web")
	histFE  = lb.MustParseL3n4Addr("10.96.0.10:80/TCP")
)

// historyAgent serves a Writer's history as an agent does.
func historyAgent(t *testing.T) (*tables.Writer, *httptest.Server) {
	t.Helper()
	w, err := tables.New(statedb.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	api.RegisterAgent(mux, slog.New(slog.DiscardHandler), api.Agent{History: w.History()})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return w, srv
}

// writeWeb declares shop/web with backends, caused by cause.
func writeWeb(t *testing.T, w *tables.Writer, cause *tables.Cause, backends ...string) {
	t.Helper()
	txn := w.WriteTxn()
	defer txn.Abort()
	w.SetCause(txn, cause)
	err := w.UpsertService(txn, lb.ServiceParams{Name: histWeb, Source: lb.SourceK8s,
		Frontends: []lb.FrontendParams{{Address: histFE, Type: lb.SVCTypeClusterIP}}})
	var params []lb.BackendParams
	for _, b := range backends {
		params = append(params, lb.BackendParams{Address: lb.MustParseL3n4Addr(b), Weight: 1})
	}
	if err == nil {
		err = w.SetBackends(txn, histWeb, lb.SourceK8s, params...)
	}
	if err != nil {
		t.Fatal(err)
	}
	txn.Commit()
}

func TestHistoryListsAFrontendsChangesWithTheirCauses(t *testing.T) {
	w, srv := historyAgent(t)
	writeWeb(t, w, &tables.Cause{Source: "k8s", Kind: "EndpointSlice", Name: "shop/web-abc", Version: "resourceVersion 1"}, "10.0.1.1:8080/TCP", "10.0.1.2:8080/TCP")
	writeWeb(t, w, &tables.Cause{Source: "k8s", Kind: "EndpointSlice", Name: "shop/web-abc", Version: "resourceVersion 2"}, "10.0.1.1:8080/TCP")

	var recs []tables.HistoryRecord
	if err := json.Unmarshal([]byte(lbctlOut(t, "history", histFE.String(), "--api", srv.URL, "-o", "json")), &recs); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[1].Cause != "k8s EndpointSlice shop/web-abc resourceVersion 2" ||
		len(recs[1].Removed) != 1 || !strings.HasPrefix(recs[1].Removed[0], "10.0.1.2:8080/TCP") {
		t.Fatalf("history of %s: %+v", histFE, recs)
	}
	table := lbctlOut(t, "history", "shop/web", "--api", srv.URL)
	if !strings.Contains(table, "-10.0.1.2:8080/TCP weight 1 active") || !strings.HasPrefix(table, "Time ") {
		t.Fatalf("table:\n%s", table)
	}
	if out := lbctlOut(t, "history", "shop/other", "--api", srv.URL, "-o", "yaml"); out != "[]\n" {
		t.Fatalf("history of a service without changes: %q", out)
	}
}

// --since keeps the changes of the last DURATION: from a dump, before
// the dump was taken (its manifest's time), so the answer is exact.
func TestHistorySinceKeepsTheRecentChanges(t *testing.T) {
	taken := time.Date(2026, 11, 26, 14, 3, 0, 0, time.UTC)
	recs := []tables.HistoryRecord{
		{Seq: 1, Time: taken.Add(-time.Hour), Frontend: histFE, Service: histWeb, Cause: "old", Change: "created"},
		{Seq: 2, Time: taken.Add(-time.Minute), Frontend: histFE, Service: histWeb, Cause: "new", Change: "changed"},
	}
	data, _ := json.Marshal(api.HistoryAnswer{Records: recs})
	archive := filepath.Join(t.TempDir(), "dump.tar.gz")
	writeTarGz(t, archive, manifestEntry, `{"format": "lbstate-dump", "version": 2, "created": "`+taken.Format(time.RFC3339)+`"}`,
		historyEntry, string(data))
	var got []tables.HistoryRecord
	if err := json.Unmarshal([]byte(lbctlOut(t, "history", "--dump", archive, "--since", "10m", "-o", "json")), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Cause != "new" {
		t.Fatalf("--since 10m: %+v", got)
	}
	if out := lbctlOut(t, "history", "--dump", archive, "--since", "2h"); strings.Count(out, "\n") != 3 {
		t.Fatalf("--since 2h:\n%s", out)
	}
}

// --watch prints the changes so far, then each new one as it commits.
func TestHistoryWatchPrintsNewChangesAsTheyCommit(t *testing.T) {
	w, srv := historyAgent(t)
	writeWeb(t, w, &tables.Cause{Source: "api", Name: "first"}, "10.0.1.1:8080/TCP")
	out := &syncbuf.Buffer{}
	done := make(chan int)
	go func() {
		done <- run([]string{"history", "--api", srv.URL, "--watch", "-o", "json", "--timeout", "2s"}, out, &bytes.Buffer{})
	}()
	waitOutput(t, out, `"cause":"api first"`)
	writeWeb(t, w, &tables.Cause{Source: "api", Name: "second"}, "10.0.1.2:8080/TCP")
	waitOutput(t, out, `"cause":"api second"`)
	srv.CloseClientConnections()
	srv.Close()
	if code := <-done; code != 1 {
		t.Fatalf("watch ended with %d when the agent went away", code)
	}
	if lines := strings.Count(out.String(), "\n"); lines != 2 {
		t.Fatalf("want one JSON line per change, got:\n%s", out.String())
	}
}

// waitOutput polls out until it holds want, or fails at the deadline.
func waitOutput(t *testing.T, out *syncbuf.Buffer, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the output by the deadline:\n%s", want, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
