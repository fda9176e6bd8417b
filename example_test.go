package lbstate_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"
	"github.com/spf13/pflag"

	"github.com/lbstate/lbstate"
	"github.com/lbstate/lbstate/lb"
	lbreconciler "github.com/lbstate/lbstate/reconciler"
)

// The whole agent in one cell, configured by its flags: here the
// manifests source on examples/demo, with in-memory maps. The sources
// given no configuration (Kubernetes, health checking, clustermesh) and
// the datapath do nothing.
func Example() {
	var (
		db        *statedb.DB
		frontends statedb.Table[*lb.Frontend]
		rec       reconciler.Reconciler[*lb.Frontend]
	)
	h := hive.New(
		lbstate.Cell,
		cell.Invoke(func(d *statedb.DB, fes statedb.Table[*lb.Frontend], r reconciler.Reconciler[*lb.Frontend]) {
			db, frontends, rec = d, fes, r
		}),
	)
	flags := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	h.RegisterFlags(flags)
	if err := flags.Parse([]string{"--manifests", "examples/demo", "--k8s-node-name", "node-a", "--lb-maps", "memory"}); err != nil {
		panic(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := h.Start(log, context.Background()); err != nil {
		panic(err)
	}
	defer h.Stop(log, context.Background())

	// The table is initialized once every source has declared what it
	// had at start.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, initialized := frontends.Initialized(db.ReadTxn())
	select {
	case <-initialized:
	case <-ctx.Done():
		panic("the manifests were not applied in 30s")
	}
	txn := db.ReadTxn()
	if err := lbreconciler.WaitReconciled(ctx, rec, frontends.Revision(txn)); err != nil {
		panic(err)
	}
	n := 0
	for fe := range frontends.All(txn) {
		if fe.Service.Name() == "web" {
			fmt.Println(fe.Address, fe.Service, len(fe.Backends), "backends")
		}
		n++
	}
	fmt.Println(n, "frontends in the maps")
	// Output:
	// 10.96.0.10:80/TCP shop/web 4 backends
	// 10.96.0.10:9090/TCP shop/web 4 backends
	// [fd00:96::10]:80/TCP shop/web 1 backends
	// [fd00:96::10]:9090/TCP shop/web 1 backends
	// 14 frontends in the maps
}
