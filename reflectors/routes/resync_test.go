package routes

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/tables"
)

// A routes source body that fails after setting a route and is run again
// lists its world anew: a route of a TrafficSplit the new run does not
// list is removed when it is synced, from a service another source
// declares (which stays).
func TestRetriedRunSweepsVanishedRoutes(t *testing.T) {
	stays := lb.NewServiceName("default", "stays")
	var (
		mu    sync.Mutex
		calls int
		w     *tables.Writer
		db    *statedb.DB
	)
	routed := func() int {
		s, _, ok := w.Services().Get(db.ReadTxn(), tables.ServiceByName.Query(stays))
		if !ok {
			return 0
		}
		return len(s.Routes())
	}
	h := hive.New(statedb.Cell, job.Cell, cell.SimpleHealthCell, tables.Cell,
		cell.Invoke(func(p reflectors.Params, d *statedb.DB) error {
			w, db = p.Writer, d
			// The services source of the same identity declares stays.
			txn := w.WriteTxn()
			if err := w.UpsertService(txn, lb.ServiceParams{Name: stays, Source: lb.SourceK8s, Frontends: []lb.FrontendParams{
				{Address: lb.MustParseL3n4Addr("10.96.0.8:80/TCP"), Type: lb.SVCTypeClusterIP}}}); err != nil {
				return err
			}
			txn.Commit()
			return reflectors.RegisterAs(p, "k8s-routes", lb.SourceK8s, func(ctx context.Context, s *reflectors.Source) error {
				mu.Lock()
				calls++
				first := calls == 1
				mu.Unlock()
				c := NewController(s, lb.SourceK8s, nil)
				return c.Run(ctx, func(ctx context.Context) error {
					if !first {
						c.Synced()
						<-ctx.Done()
						return nil
					}
					c.Push(&TrafficSplit{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "split"},
						Spec: TrafficSplitSpec{Service: "stays", Backends: []TrafficSplitBackend{{Service: "gone", Weight: 1}}}}, false)
					c.Synced()
					for routed() == 0 {
						time.Sleep(time.Millisecond)
					}
					return errors.New("watch broken")
				})
			})
		}))
	log := slog.New(slog.DiscardHandler)
	if err := h.Start(log, context.Background()); err != nil {
		t.Fatal(err)
	}
	defer h.Stop(log, context.Background())
	deadline := time.Now().Add(30 * time.Second)
	for routed() != 0 || !retried(&mu, &calls) {
		if time.Now().After(deadline) {
			t.Fatalf("%s keeps the route of a TrafficSplit the new run does not list", stays)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, _, ok := w.Services().Get(db.ReadTxn(), tables.ServiceByName.Query(stays)); !ok {
		t.Fatalf("%s, declared by another source, was swept", stays)
	}
}

func retried(mu *sync.Mutex, calls *int) bool {
	mu.Lock()
	defer mu.Unlock()
	return *calls > 1
}
