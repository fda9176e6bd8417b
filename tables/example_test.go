package tables_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// Declare a service and its backends through the Writer, then read the
// backends selected for its frontend.
func Example() {
	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		panic(err)
	}
	web := lb.NewServiceName("default", "web")

	txn := w.WriteTxn()
	err = w.UpsertService(txn, lb.ServiceParams{
		Name:   web,
		Source: lb.SourceK8s,
		Frontends: []lb.FrontendParams{
			{Address: lb.MustParseL3n4Addr("10.96.0.1:80/TCP"), Type: lb.SVCTypeClusterIP},
		},
	})
	if err == nil {
		err = w.UpsertBackends(txn, web, lb.SourceK8s,
			lb.BackendParams{Address: lb.MustParseL3n4Addr("10.0.0.1:8080/TCP"), Weight: 90},
			lb.BackendParams{Address: lb.MustParseL3n4Addr("10.0.0.2:8080/TCP"), Weight: 10},
			lb.BackendParams{Address: lb.MustParseL3n4Addr("10.0.0.3:8080/TCP"), Weight: 100, State: lb.BackendTerminating},
		)
	}
	if err != nil {
		txn.Abort()
		panic(err)
	}
	rtxn := txn.Commit()

	for fe := range w.FrontendsOf(rtxn, web) {
		fmt.Println(fe.Address, fe.Type)
		for _, b := range fe.Backends {
			fmt.Println("  ", b)
		}
	}
	// Output:
	// 10.96.0.1:80/TCP ClusterIP
	//    10.0.0.1:8080/TCP (weight=90)
	//    10.0.0.2:8080/TCP (weight=10)
	//    10.0.0.3:8080/TCP (terminating weight=0)
}

// Compose the tables with hive, as an agent does, and use the Writer from
// a cell.
func Example_hive() {
	h := hive.New(
		statedb.Cell,
		tables.Cell,
		cell.Invoke(func(db *statedb.DB, w *tables.Writer, frontends statedb.Table[*lb.Frontend]) {
			txn := w.WriteTxn()
			defer txn.Abort()
			err := w.UpsertService(txn, lb.ServiceParams{
				Name:   lb.NewServiceName("default", "dns"),
				Source: lb.SourceFile,
				Frontends: []lb.FrontendParams{
					{Address: lb.MustParseL3n4Addr("[fd00::10]:53/UDP"), Type: lb.SVCTypeClusterIP},
				},
			})
			if err != nil {
				panic(err)
			}
			txn.Commit()
			fmt.Println("frontends:", frontends.NumObjects(db.ReadTxn()))
		}),
	)
	log := slog.New(slog.DiscardHandler)
	if err := h.Start(log, context.Background()); err != nil {
		panic(err)
	}
	defer h.Stop(log, context.Background())
	// Output: frontends: 1
}
