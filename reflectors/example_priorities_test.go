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
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/tables"
)

// An embedder's two sources, each registered once with its name and
// priority: an operator's pinned overrides outrank everything built in
// (api is 500), an inventory database sits between k8s (300) and
// kvstore (200).
var (
	pinned    = lb.MustRegisterSource("pinned", 600)
	inventory = lb.MustRegisterSource("inventory", 250)
)

var shop = lb.NewServiceName("default", "shop")

// declareShop returns a source body that declares the shop service with
// its algorithm and backends and, once retire is closed (nil: never),
// withdraws its declaration of the service, keeping its backends. Its
// input is constant, so any error is the program's and is returned
// (Example_source shows how a source skips bad input).
func declareShop(alg lb.Algorithm, retire <-chan struct{}, backends ...string) reflectors.RunFunc {
	return func(ctx context.Context, s *reflectors.Source) error {
		w := s.Writer
		txn := w.WriteTxn()
		defer txn.Abort()
		err := w.Batch(txn, func() error {
			if err := w.UpsertService(txn, lb.ServiceParams{
				Name: shop, Source: s.ID(), Algorithm: alg,
				Frontends: []lb.FrontendParams{{Address: lb.MustParseL3n4Addr("10.96.0.7:80/TCP"), Type: lb.SVCTypeClusterIP}},
			}); err != nil {
				return err
			}
			bes := make([]lb.BackendParams, len(backends))
			for i, a := range backends {
				bes[i] = lb.BackendParams{Address: lb.MustParseL3n4Addr(a), Weight: lb.DefaultBackendWeight}
			}
			return w.SetBackends(txn, shop, s.ID(), bes...)
		})
		if err != nil {
			return err
		}
		txn.Commit()
		s.Synced()

		select {
		case <-ctx.Done():
			return nil
		case <-retire:
		}
		wtxn := w.WriteTxn()
		if err := w.DeleteService(wtxn, shop, s.ID()); err != nil {
			wtxn.Abort()
			return err
		}
		wtxn.Commit()
		<-ctx.Done()
		return nil
	}
}

// Two sources declare the same service: the higher priority owns its
// policy (here the algorithm), the backends of both are merged, and when
// the higher one withdraws its declaration the lower one owns the
// service, with nothing else changed.
func Example_priorities() {
	retire := make(chan struct{})
	var (
		db        *statedb.DB
		frontends statedb.Table[*lb.Frontend]
	)
	h := hive.New(
		statedb.Cell, job.Cell, cell.SimpleHealthCell, tables.Cell,
		cell.Invoke(func(p reflectors.Params) error {
			return errors.Join(
				reflectors.Register(p, pinned, declareShop(lb.AlgorithmMaglev, retire, "10.0.9.1:8080/TCP")),
				reflectors.Register(p, inventory, declareShop(lb.AlgorithmRandom, nil, "10.0.0.1:8080/TCP", "10.0.0.2:8080/TCP")),
			)
		}),
		cell.Invoke(func(d *statedb.DB, fes statedb.Table[*lb.Frontend]) { db, frontends = d, fes }),
	)
	log := slog.New(slog.DiscardHandler)
	if err := h.Start(log, context.Background()); err != nil {
		panic(err)
	}
	defer h.Stop(log, context.Background())

	_, initialized := frontends.Initialized(db.ReadTxn())
	<-initialized
	show := func() <-chan struct{} {
		fe, _, changed, _ := frontends.GetWatch(db.ReadTxn(), tables.FrontendByAddress.Query(lb.MustParseL3n4Addr("10.96.0.7:80/TCP")))
		fmt.Println(fe.Service, "policy of", fe.Policy.Source, fe.Policy.Algorithm, fe.Backends)
		return changed
	}
	changed := show()
	close(retire)
	<-changed
	show()
	// Output:
	// default/shop policy of pinned maglev [10.0.0.1:8080/TCP 10.0.0.2:8080/TCP 10.0.9.1:8080/TCP]
	// default/shop policy of inventory random [10.0.0.1:8080/TCP 10.0.0.2:8080/TCP 10.0.9.1:8080/TCP]
}
