package k8s

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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/tables"
)

// A source body that fails after declaring services and is run again
// lists its world anew: what disappeared in between is removed when the
// new run is synced (a service), what is still there stays. (The routes
// source does the same with its routes: routes.TestRetriedRunSweepsVanishedRoutes.)
func TestRetriedRunSweepsWhatVanished(t *testing.T) {
	service := func(name, ip string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: []corev1.ServicePort{{Port: 80}}}}
	}
	gone, stays := lb.NewServiceName("default", "gone"), lb.NewServiceName("default", "stays")
	var (
		mu    sync.Mutex
		calls int
		w     *tables.Writer
		db    *statedb.DB
	)
	h := hive.New(statedb.Cell, job.Cell, cell.SimpleHealthCell, tables.Cell,
		cell.Invoke(func(p reflectors.Params, d *statedb.DB) error {
			w, db = p.Writer, d
			return reflectors.Register(p, lb.SourceK8s, func(ctx context.Context, s *reflectors.Source) error {
				mu.Lock()
				calls++
				first := calls == 1
				mu.Unlock()
				cfg := DefaultConfig
				cfg = cfg.WithNode("n1")
				r, err := NewReflector(cfg, s, lb.SourceK8s)
				if err != nil {
					return err
				}
				return r.Run(ctx, func(ctx context.Context) error {
					r.Push(service("stays", "10.96.0.8"), false)
					if !first {
						r.Synced()
						<-ctx.Done()
						return nil
					}
					r.Push(service("gone", "10.96.0.9"), false)
					r.Synced()
					for !declared(w, db, gone) {
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
	for declared(w, db, gone) || !retried(&mu, &calls) {
		if time.Now().After(deadline) {
			t.Fatalf("%s still declared after the run was retried", gone)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !declared(w, db, stays) {
		t.Fatalf("%s, listed again by the new run, was swept", stays)
	}
}

func routed(w *tables.Writer, db *statedb.DB, name lb.ServiceName) int {
	s, _, ok := w.Services().Get(db.ReadTxn(), tables.ServiceByName.Query(name))
	if !ok {
		return 0
	}
	return len(s.Routes())
}

func declared(w *tables.Writer, db *statedb.DB, name lb.ServiceName) bool {
	_, _, ok := w.Services().Get(db.ReadTxn(), tables.ServiceByName.Query(name))
	return ok
}

func retried(mu *sync.Mutex, calls *int) bool {
	mu.Lock()
	defer mu.Unlock()
	return *calls > 1
}
