package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/lbstate/lbstate/api"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// A change with three causes (the third is kept apart from the first
// two) and a reconciler's error (kept apart from the entry) prints all
// three causes, in order, and the error: in the table and in JSON.
func TestHistoryPrintsEveryCauseOfAChangeAndItsError(t *testing.T) {
	var (
		w   *tables.Writer
		db  *statedb.DB
		rf  tables.ReconcilerFrontends
		mux = http.NewServeMux()
	)
	h := hive.New(statedb.Cell, tables.Cell, cell.Invoke(func(d *statedb.DB, wr *tables.Writer, r tables.ReconcilerFrontends) {
		w, db, rf = wr, d, r
		api.RegisterAgent(mux, slog.New(slog.DiscardHandler), api.Agent{History: wr.History()})
	}))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := h.Start(log, context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Stop(log, context.Background()) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	causes := []*tables.Cause{
		{Source: "k8s", Kind: "Service", Namespace: "shop", Name: "web", ResourceVersion: "5"},
		{Source: "k8s", Kind: "EndpointSlice", Namespace: "shop", Name: "web-1", ResourceVersion: "7"},
		{Source: "health", Name: "10.0.1.1:8080", Detail: "breaker tripped"},
	}
	txn := w.WriteTxn()
	defer txn.Abort()
	w.SetCause(txn, causes[0])
	err := w.UpsertService(txn, lb.ServiceParams{Name: histWeb, Source: lb.SourceK8s,
		Frontends: []lb.FrontendParams{{Address: histFE, Type: lb.SVCTypeClusterIP}}})
	for i, c := range causes[1:] {
		w.SetCause(txn, c)
		if err == nil {
			err = w.SetBackends(txn, histWeb, lb.SourceK8s, lb.BackendParams{Address: lb.MustParseL3n4Addr("10.0.1.1:8080/TCP"), Weight: uint16(i + 1)})
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	txn.Commit()
	// What the reconciler writes back when the maps refuse the row.
	fes := rf.RWTable()
	wtxn := db.WriteTxn(fes)
	fe, _, _ := fes.Get(wtxn, tables.FrontendByAddress.Query(histFE))
	if _, _, err := fes.Insert(wtxn, fe.Clone().SetStatus(reconciler.StatusError(errors.New("map full")))); err != nil {
		t.Fatal(err)
	}
	wtxn.Commit()

	const want = "k8s Service shop/web resourceVersion 5; k8s EndpointSlice shop/web-1 resourceVersion 7; health 10.0.1.1:8080 breaker tripped"
	table := lbctlOut(t, "history", "--api", srv.URL)
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], want) || !strings.Contains(lines[1], "created: +10.0.1.1:8080/TCP weight 2 active") ||
		!strings.Contains(lines[1], "error in ") || !strings.HasSuffix(lines[1], "(map full)") {
		t.Fatalf("table:\n%s", table)
	}
	var recs []tables.HistoryRecord
	if err := json.Unmarshal([]byte(lbctlOut(t, "history", "--api", srv.URL, "-o", "json")), &recs); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Cause != want || len(recs[0].Causes) != 3 || recs[0].Causes[2] != *causes[2] ||
		recs[0].Outcome.State != tables.OutcomeError || recs[0].Outcome.Error != "map full" {
		t.Fatalf("records: %+v", recs)
	}
}
