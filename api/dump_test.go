package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// The API's /statedb/dump writes the same bytes as StateDB's own dump
// (ReadTxn.WriteJSON), which lbctl dump splits by lines: for empty
// tables, for tables of a few rows, and for tables of many chunks of
// rows, backends (which encode themselves) and frontends (json.Marshal)
// alike.
func TestDumpWritesStateDBsLayout(t *testing.T) {
	for _, services := range []int{0, 3, 3*dumpChunkRows + 7} {
		t.Run(fmt.Sprint(services), func(t *testing.T) {
			db := statedb.New()
			w, err := tables.New(db, nil)
			if err != nil {
				t.Fatal(err)
			}
			txn := w.WriteTxn()
			for s := range services {
				name := lb.NewServiceName("ns", fmt.Sprintf("svc-%d", s))
				fe := lb.MustParseL3n4Addr(fmt.Sprintf("10.96.%d.%d:80/TCP", s>>8, s&255))
				if err := w.UpsertService(txn, lb.ServiceParams{Name: name, Source: lb.SourceAPI,
					Frontends: []lb.FrontendParams{{Address: fe, Type: lb.SVCTypeClusterIP}}}); err != nil {
					t.Fatal(err)
				}
				be := lb.MustParseL3n4Addr(fmt.Sprintf("172.16.%d.%d:8080/TCP", s>>8, s&255))
				if err := w.SetBackends(txn, name, lb.SourceAPI, lb.BackendParams{Address: be, Weight: 1}); err != nil {
					t.Fatal(err)
				}
			}
			txn.Commit()

			var want bytes.Buffer
			if err := db.ReadTxn().WriteJSON(&want); err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(Handler(slog.New(slog.DiscardHandler), db, nil))
			t.Cleanup(srv.Close)
			code, got := get(t, srv.URL+"/statedb/dump")
			if code != 200 || got != want.String() {
				t.Errorf("%d, %d bytes; StateDB's dump is %d bytes\n got: %.600s\nwant: %.600s", code, len(got), want.Len(), got, want.String())
			}
		})
	}
}

// A dump whose client went away (its request's context ended) stops:
// nothing more is written and writeTables says why, rather than encoding
// the rest of the tables for nobody while holding the read transaction.
func TestDumpStopsWhenItsClientGoesAway(t *testing.T) {
	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	txn := w.WriteTxn()
	for s := range 8000 {
		name := lb.NewServiceName("ns", fmt.Sprintf("svc-%d", s))
		fe := lb.MustParseL3n4Addr(fmt.Sprintf("10.96.%d.%d:80/TCP", s>>8, s&255))
		if err := w.UpsertService(txn, lb.ServiceParams{Name: name, Source: lb.SourceAPI,
			Frontends: []lb.FrontendParams{{Address: fe, Type: lb.SVCTypeClusterIP}}}); err != nil {
			t.Fatal(err)
		}
	}
	txn.Commit()
	var full bytes.Buffer
	if err := writeTables(context.Background(), &full, db, db.ReadTxn()); err != nil {
		t.Fatal(err)
	}
	if full.Len() < 4*dumpBufferBytes {
		t.Fatalf("the dump (%d bytes) fits in few writes: nothing to stop", full.Len())
	}
	ctx, cancel := context.WithCancel(context.Background())
	gone := &cancelOnWrite{cancel: cancel}
	err = writeTables(ctx, gone, db, db.ReadTxn())
	if !errors.Is(err, context.Canceled) {
		t.Errorf("writeTables after its client went away: %v, want %v", err, context.Canceled)
	}
	if gone.n != 1 || gone.bytes >= full.Len()/2 {
		t.Errorf("after the client went away at its first write: %d writes, %d of the dump's %d bytes", gone.n, gone.bytes, full.Len())
	}
}

// cancelOnWrite is a connection whose client goes away after the first
// write reached it.
type cancelOnWrite struct {
	cancel   func()
	n, bytes int
}

func (c *cancelOnWrite) Write(p []byte) (int, error) {
	c.n++
	c.bytes += len(p)
	c.cancel()
	return len(p), nil
}
