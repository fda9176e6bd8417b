package api

import (
	"bytes"
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
