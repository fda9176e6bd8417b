package reflectors_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/metrics"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/tables"
)

// static is the source's identity, registered once with its name and
// its priority: above file (400), below api (500).
var static = lb.MustRegisterSource("static", 450)

// staticCell is a complete source: it declares one service with two
// backends, marks itself synced in the same transaction, and keeps them
// until the hive stops.
var staticCell = cell.Module("static-source", "A fixed service",
	cell.Invoke(func(p reflectors.Params) error {
		return reflectors.Register(p, static, runStatic)
	}),
)

func runStatic(ctx context.Context, s *reflectors.Source) error {
	web := lb.NewServiceName("default", "web")
	w := s.Writer
	// Invalid input is skipped alone; any other error aborts the whole
	// transaction and is returned, and the job runs again.
	skipInvalid := func(err error) error {
		if errors.Is(err, tables.ErrInvalid) {
			s.Reject(err) // logged with the object and field, counted
			return nil
		}
		return err
	}
	txn := w.WriteTxn()
	defer txn.Abort()
	err := w.Batch(txn, func() error { // one derivation of the frontends for all the calls
		if err := skipInvalid(w.UpsertService(txn, lb.ServiceParams{
			Name: web, Source: s.ID(), // the rows it writes carry its identity
			Frontends: []lb.FrontendParams{{Address: lb.MustParseL3n4Addr("10.96.0.1:80/TCP"), Type: lb.SVCTypeClusterIP}},
		})); err != nil {
			return err
		}
		const weight = lb.DefaultBackendWeight // 0 takes no new flows
		return skipInvalid(w.SetBackends(txn, web, s.ID(),
			lb.BackendParams{Address: lb.MustParseL3n4Addr("10.0.0.1:8080/TCP"), Weight: weight},
			lb.BackendParams{Address: lb.MustParseL3n4Addr("10.0.0.2:8080/TCP"), Weight: weight}))
	})
	if err != nil {
		return err // nothing of the batch is committed
	}
	txn.Commit()
	s.SetObjects("services", 1)
	s.Synced() // nothing is pruned until every source is synced

	<-ctx.Done() // a real source follows its world until the hive stops
	return nil
}

// A source in 30 lines: compose its cell with the tables and read what it
// declared once the tables are initialized.
func Example_source() {
	var (
		db        *statedb.DB
		frontends statedb.Table[*lb.Frontend]
	)
	h := hive.New(
		statedb.Cell, job.Cell, cell.SimpleHealthCell, metrics.Cell, tables.Cell,
		staticCell,
		cell.Invoke(func(d *statedb.DB, fes statedb.Table[*lb.Frontend]) { db, frontends = d, fes }),
	)
	log := slog.New(slog.DiscardHandler)
	if err := h.Start(log, context.Background()); err != nil {
		panic(err)
	}
	defer h.Stop(log, context.Background())

	_, initialized := frontends.Initialized(db.ReadTxn())
	<-initialized
	for fe := range frontends.All(db.ReadTxn()) {
		fmt.Println(fe.Address, fe.Service, fe.Backends)
	}
	// Output: 10.96.0.1:80/TCP default/web [10.0.0.1:8080/TCP 10.0.0.2:8080/TCP]
}
