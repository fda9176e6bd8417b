package tables

// The Writer's two error kinds: invalid input (ErrInvalid, changes
// nothing) and everything else (the transaction must be aborted).

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
)

func TestInvalidErrorNamesObjectAndField(t *testing.T) {
	err := Invalidf("service default/web", `port "http"`, "unknown protocol %q", "TPC")
	if got, want := err.Error(), `service default/web: port "http": unknown protocol "TPC"`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	wrapped := fmt.Errorf("manifest web.yaml: %w", err)
	if !errors.Is(wrapped, ErrInvalid) {
		t.Error("a wrapped InvalidError is not ErrInvalid")
	}
	var inv *InvalidError
	if !errors.As(wrapped, &inv) || inv.Object != "service default/web" || inv.Field != `port "http"` {
		t.Errorf("errors.As: %+v", inv)
	}
	if AsInvalid(nil) != nil {
		t.Error("AsInvalid(nil) is not nil")
	}
	if AsInvalid(err) != err {
		t.Error("AsInvalid wrapped invalid input again")
	}
	if plain := errors.New("x"); !errors.Is(AsInvalid(plain), plain) || AsInvalid(plain).Error() != "x" {
		t.Error("AsInvalid hides or renames its error")
	}
}

// Every Writer method reports bad input as ErrInvalid, with an error
// that names the object, and leaves the tables as they were.
func TestWriterInvalidInputIsErrInvalidAndChangesNothing(t *testing.T) {
	fe := []lb.FrontendParams{{Address: vip1, Type: lb.SVCTypeClusterIP}}
	bad := lb.NewServiceName("c2", "other/a") // a '/' in a part
	unknown := lb.Source(201)
	calls := map[string]func(w *Writer, txn statedb.WriteTxn) error{
		"UpsertService": func(w *Writer, txn statedb.WriteTxn) error {
			return w.UpsertService(txn, lb.ServiceParams{Name: nameB, Source: lb.SourceK8s, Frontends: fe, Algorithm: lb.Algorithm(99)})
		},
		"DeleteService": func(w *Writer, txn statedb.WriteTxn) error { return w.DeleteService(txn, bad, lb.SourceK8s) },
		"UpsertBackends": func(w *Writer, txn statedb.WriteTxn) error {
			return w.UpsertBackends(txn, nameA, lb.SourceK8s, lb.BackendParams{Address: backend2, State: lb.BackendState(99)})
		},
		"SetBackends": func(w *Writer, txn statedb.WriteTxn) error { return w.SetBackends(txn, nameA, unknown) },
		"SetClusterBackends": func(w *Writer, txn statedb.WriteTxn) error {
			return w.SetClusterBackends(txn, nameA, lb.SourceKVStore, 2, lb.BackendParams{Address: backend2, ClusterID: 3})
		},
		"ReleaseBackends": func(w *Writer, txn statedb.WriteTxn) error {
			return w.ReleaseBackends(txn, bad, lb.SourceK8s, backend1)
		},
		"DeleteSource": func(w *Writer, txn statedb.WriteTxn) error { return w.DeleteSource(txn, unknown) },
		"SweepSource": func(w *Writer, txn statedb.WriteTxn) error {
			return w.SweepSource(txn, unknown, func(lb.ServiceName) bool { return true })
		},
		"DeleteSourceCluster": func(w *Writer, txn statedb.WriteTxn) error { return w.DeleteSourceCluster(txn, unknown, 2) },
		"SetBackendVerdict": func(w *Writer, txn statedb.WriteTxn) error {
			return w.SetBackendVerdict(txn, backend2, lb.HealthVerdict{Healthy: false})
		},
		"SetRedirect": func(w *Writer, txn statedb.WriteTxn) error {
			return w.SetRedirect(txn, nameA, lb.Redirect{Source: lb.SourceRedirect})
		},
		"ClearRedirect": func(w *Writer, txn statedb.WriteTxn) error { return w.ClearRedirect(txn, nameA, unknown) },
		"SetProxyRedirect": func(w *Writer, txn statedb.WriteTxn) error {
			return w.SetProxyRedirect(txn, nameA, lb.ProxyRedirect{Source: lb.SourceK8s})
		},
		"ClearProxyRedirect": func(w *Writer, txn statedb.WriteTxn) error { return w.ClearProxyRedirect(txn, bad, lb.SourceK8s) },
		"SetRoute": func(w *Writer, txn statedb.WriteTxn) error {
			return w.SetRoute(txn, nameA, lb.Route{Source: lb.SourceK8s, Backends: []lb.RouteBackend{{Service: bad}}})
		},
		"ClearRoute":    func(w *Writer, txn statedb.WriteTxn) error { return w.ClearRoute(txn, nameA, unknown, 80) },
		"SetLocalNode":  func(w *Writer, txn statedb.WriteTxn) error { return w.SetLocalNode(txn, lb.SourceK8s, lb.Node{}) },
		"SetNodeLabels": func(w *Writer, txn statedb.WriteTxn) error { return w.SetNodeLabels(txn, "", nil) },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			w := newTestWriter(t)
			mustWrite(t, w, func(txn statedb.WriteTxn) error {
				if err := w.UpsertService(txn, lb.ServiceParams{Name: nameA, Source: lb.SourceK8s, Frontends: fe}); err != nil {
					return err
				}
				return w.UpsertBackends(txn, nameA, lb.SourceK8s, lb.BackendParams{Address: backend1, Weight: 100})
			})
			before := w.db.ReadTxn()
			txn := w.WriteTxn()
			defer txn.Abort()
			err := call(w, txn)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v (%T) is not ErrInvalid", err, err)
			}
			var inv *InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("errors.As(%v, *InvalidError) failed", err)
			}
			if diff := compareTables(w, before, w, txn); diff != nil {
				t.Errorf("invalid input (%v) changed the tables: %v", err, diff)
			}
		})
	}
}

// A failure of a write (here: a table the transaction does not lock)
// is not invalid input, inside a Batch or not, even when the batch also
// met invalid input: a source that tested errors.Is(err, ErrInvalid)
// would otherwise commit half a batch.
func TestWriterInternalErrorIsNotInvalid(t *testing.T) {
	w := newTestWriter(t)
	fe := []lb.FrontendParams{{Address: vip1, Type: lb.SVCTypeClusterIP}}
	// Services only: the refresh's writes to frontends and backends fail.
	txn := w.db.WriteTxn(w.t.services)
	defer txn.Abort()
	err := w.UpsertService(txn, lb.ServiceParams{Name: nameA, Source: lb.SourceK8s, Frontends: fe})
	if err == nil || errors.Is(err, ErrInvalid) {
		t.Fatalf("write to an unlocked table: error %v, want one that is not ErrInvalid", err)
	}
	if !errors.Is(err, statedb.ErrTableNotLockedForWriting) {
		t.Errorf("error %v does not say why (statedb.ErrTableNotLockedForWriting)", err)
	}
	txn.Abort()

	txn2 := w.db.WriteTxn(w.t.services)
	defer txn2.Abort()
	err = w.Batch(txn2, func() error {
		if err := w.UpsertService(txn2, lb.ServiceParams{Name: nameA, Source: lb.SourceK8s, Frontends: fe}); err != nil {
			return err
		}
		return w.UpsertBackends(txn2, bad(), lb.SourceK8s) // invalid input, and the refresh will fail
	})
	if err == nil || errors.Is(err, ErrInvalid) {
		t.Fatalf("batch with invalid input and a failed refresh: error %v, want one that is not ErrInvalid", err)
	}
	txn2.Abort()

	txn3 := w.WriteTxn()
	defer txn3.Abort()
	if err := w.Batch(txn3, func() error { return w.Batch(txn3, func() error { return nil }) }); err == nil || errors.Is(err, ErrInvalid) {
		t.Errorf("nested Batch: error %v, want one that is not ErrInvalid", err)
	}
}

func bad() lb.ServiceName { return lb.NewServiceName("c2", "other/a") }
