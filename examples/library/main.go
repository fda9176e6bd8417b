// Command library is the README's "Using the library" program: it starts
// lbstate.Core (the tables, the maps and the reconciler) in a hive,
// declares a service and its backends through the Writer, waits until the
// reconciler has written them into the maps, prints the maps and stops.
package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/lbstate/lbstate"
	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
	lbreconciler "github.com/lbstate/lbstate/reconciler"
	"github.com/lbstate/lbstate/tables"
)

func main() {
	var (
		w         *tables.Writer
		frontends statedb.Table[*lb.Frontend]
		rec       reconciler.Reconciler[*lb.Frontend]
		maps      *bpf.Maps
	)
	h := hive.New(
		lbstate.Core, // the database, the tables and the Writer, the maps, tables → maps
		cell.Invoke(func(wr *tables.Writer, fes statedb.Table[*lb.Frontend], r reconciler.Reconciler[*lb.Frontend], m *bpf.Maps) {
			w, frontends, rec, maps = wr, fes, r, m
		}),
	)
	// In-memory maps; as root, "kernel" (or the default "auto") pins
	// real BPF maps in /sys/fs/bpf/lbstate.
	hive.AddConfigOverride(h, func(c *bpf.ModeConfig) { c.LBMaps = "memory" })
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := h.Start(log, context.Background()); err != nil {
		panic(err)
	}
	defer h.Stop(log, context.Background())

	web := lb.NewServiceName("default", "web")
	txn := w.WriteTxn()
	err := w.UpsertService(txn, lb.ServiceParams{
		Name:   web,
		Source: lb.SourceAPI,
		Frontends: []lb.FrontendParams{
			{Address: lb.MustParseL3n4Addr("10.96.0.1:80/TCP"), Type: lb.SVCTypeClusterIP},
		},
	})
	if err == nil {
		err = w.UpsertBackends(txn, web, lb.SourceAPI,
			lb.BackendParams{Address: lb.MustParseL3n4Addr("10.0.0.1:8080/TCP"), Weight: 100},
			lb.BackendParams{Address: lb.MustParseL3n4Addr("10.0.0.2:8080/TCP"), Weight: 100},
		)
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
	dump, err := bpf.TakeDump(maps)
	if err != nil {
		panic(err)
	}
	dump.WriteText(os.Stdout)
}
