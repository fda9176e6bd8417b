package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/lbstate/lbstate"
	"github.com/lbstate/lbstate/api"
	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
	lbreconciler "github.com/lbstate/lbstate/reconciler"
	"github.com/lbstate/lbstate/tables"
)

// An embedder's HTTP server, with a handler of its own, gets the API
// beside it from a cell.Invoke; lbctl --api URL then reads the tables
// and the maps of the agent (here, as lbctl does: a frontend's row and
// the maps' dump).
func ExampleRegister() {
	mux := http.NewServeMux() // the embedder's, with a handler of its own
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	// The API beside it, over the hive's tables and maps.
	serveAPI := cell.Invoke(func(log *slog.Logger, db *statedb.DB, maps *bpf.Maps) {
		api.Register(mux, log, db, maps)
	})

	var (
		w         *tables.Writer
		frontends statedb.Table[*lb.Frontend]
		rec       reconciler.Reconciler[*lb.Frontend]
	)
	h := hive.New(
		lbstate.Core,
		serveAPI,
		cell.Invoke(func(wr *tables.Writer, fes statedb.Table[*lb.Frontend], r reconciler.Reconciler[*lb.Frontend]) {
			w, frontends, rec = wr, fes, r
		}),
	)
	hive.AddConfigOverride(h, func(c *bpf.ModeConfig) { c.LBMaps = "memory" })
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := h.Start(log, context.Background()); err != nil {
		panic(err)
	}
	defer h.Stop(log, context.Background())
	srv := httptest.NewServer(mux) // the embedder's listener
	defer srv.Close()

	web := lb.NewServiceName("default", "web")
	txn := w.WriteTxn()
	err := w.UpsertService(txn, lb.ServiceParams{Name: web, Source: lb.SourceAPI,
		Frontends: []lb.FrontendParams{{Address: lb.MustParseL3n4Addr("10.96.0.1:80/TCP"), Type: lb.SVCTypeClusterIP}}})
	if err == nil {
		err = w.UpsertBackends(txn, web, lb.SourceAPI, lb.BackendParams{Address: lb.MustParseL3n4Addr("10.0.0.1:8080/TCP"), Weight: 100})
	}
	if err != nil {
		txn.Abort()
		panic(err)
	}
	rev := frontends.Revision(txn.Commit())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := lbreconciler.WaitReconciled(ctx, rec, rev); err != nil {
		panic(err)
	}

	// A row by a query in text, which the agent turns into its index's
	// key; the client names the read API version it speaks.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+api.RowsPath+"frontends?address="+url.QueryEscape("10.96.0.1:80/TCP"), nil)
	req.Header.Set(api.VersionHeader, strconv.Itoa(api.ReadAPIVersion))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	for dec := json.NewDecoder(resp.Body); ; {
		var row struct{ Obj *lb.Frontend }
		if dec.Decode(&row) != nil {
			break
		}
		fmt.Println("frontend", row.Obj.Address, row.Obj.Service, row.Obj.Backends[0].Address)
	}
	resp.Body.Close()
	resp, err = http.Get(srv.URL + "/healthz")
	if err != nil {
		panic(err)
	}
	io.Copy(os.Stdout, resp.Body)
	resp.Body.Close()
	resp, err = http.Get(srv.URL + api.MapsPath)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var dump bpf.Dump
	if err := json.NewDecoder(resp.Body).Decode(&dump); err != nil {
		panic(err)
	}
	dump.WriteText(os.Stdout)
	// Output:
	// frontend 10.96.0.1:80/TCP default/web 10.0.0.1:8080/TCP
	// ok
	// backend 1 10.0.0.1:8080/TCP active
	// revnat 1 10.96.0.1:80
	// service 10.96.0.1:80/TCP master revnat=1 type=ClusterIP algorithm=random count=1 standby=0
	// service 10.96.0.1:80/TCP slot=1 backend=1
}
