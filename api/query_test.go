package api

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/internal/syncbuf"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// newTables returns tables holding the service default/dns at
// 10.96.0.10:53/UDP, and in-memory maps.
func newTables(t *testing.T) (*statedb.DB, *bpf.Maps) {
	t.Helper()
	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	txn := w.WriteTxn()
	if err := w.UpsertService(txn, lb.ServiceParams{Name: lb.NewServiceName("default", "dns"), Source: lb.SourceAPI,
		Frontends: []lb.FrontendParams{{Address: lb.MustParseL3n4Addr("10.96.0.10:53/UDP"), Type: lb.SVCTypeClusterIP}}}); err != nil {
		t.Fatal(err)
	}
	txn.Commit()
	maps, err := bpf.NewMemoryMaps(bpf.DefaultConfig, nil)
	if err != nil {
		t.Fatal(err)
	}
	return db, maps
}

// get GETs url and returns the status code and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// A query for an index the table does not have is answered 400 with the
// error, and logged without a stack trace. It once made StateDB's handler
// panic: net/http logged the stack and cut the connection.
func TestQueryForUnknownIndexAnswers400(t *testing.T) {
	var logs syncbuf.Buffer
	db, maps := newTables(t)
	srv := httptest.NewServer(Handler(slog.New(slog.NewTextHandler(&logs, nil)), db, maps))
	t.Cleanup(srv.Close)
	for _, index := range []string{"nope", ""} {
		body := fmt.Sprintf(`{"table": "frontends", "index": %q, "key": ""}`, index)
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/statedb/query", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("index %q: %v", index, err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := fmt.Sprintf(`table \"frontends\" has no index \"%s\" (it has address`, index)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(answer), want) {
			t.Errorf("index %q: %s %s, want 400 and %s", index, resp.Status, answer, want)
		}
	}
	if code, body := get(t, srv.URL+"/statedb/dump/frontends"); code != http.StatusOK || !strings.Contains(body, "10.96.0.10") {
		t.Fatalf("after the bad queries, the frontends dump: %d %.300s", code, body) // still answering
	}
	if strings.Contains(logs.String(), "goroutine") {
		t.Fatalf("a stack trace in the log:\n%s", logs.String())
	}
}
