package tables

// Bad input is an error that changes nothing, and what the Writer keeps
// of its input is its own copy.

import (
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
)

// Service names are validated: a zero name is rejected, and so is a name
// whose parts contain '/', which would print like (and be looked up as) a
// different, real service. (SetRedirect and DeleteService once accepted
// such names.)
func TestInvalidServiceNamesRejected(t *testing.T) {
	t.Run("zero name", func(t *testing.T) {
		w := newTestWriter(t)
		txn := w.WriteTxn()
		defer txn.Abort()
		err := w.SetRedirect(txn, lb.ServiceName{}, lb.Redirect{Source: lb.SourceRedirect, To: nameB})
		if err == nil {
			n := w.Services().NumObjects(txn)
			t.Fatalf("SetRedirect with a zero service name: no error, %d service rows written", n)
		}
	})

	real := lb.NewServiceName("other", "a").WithCluster("c2") // c2/other/a
	bogus := lb.NewServiceName("c2", "other/a")               // also prints c2/other/a; Validate rejects it
	if bogus.Validate() == nil {
		t.Fatal("precondition: bogus name should be invalid")
	}
	setup := func() *Writer {
		w := newTestWriter(t)
		mustWrite(t, w, func(txn statedb.WriteTxn) error {
			if err := w.UpsertService(txn, lb.ServiceParams{Name: real, Source: lb.SourceK8s,
				Frontends: []lb.FrontendParams{{Address: vip1, Type: lb.SVCTypeClusterIP}}}); err != nil {
				return err
			}
			return w.UpsertBackends(txn, real, lb.SourceK8s, lb.BackendParams{Address: backend1, Weight: 100})
		})
		return w
	}

	t.Run("SetRedirect aliases another service", func(t *testing.T) {
		w := setup()
		txn := w.WriteTxn()
		defer txn.Abort()
		err := w.SetRedirect(txn, bogus, lb.Redirect{Source: lb.SourceRedirect, To: nameB})
		svc, _, _ := w.Services().Get(txn, ServiceByName.Query(real))
		if err == nil {
			t.Fatalf("SetRedirect(%q (invalid)) returned no error; service %s now has redirects %v", bogus, real, svc.Redirects())
		}
	})

	t.Run("DeleteService aliases another service", func(t *testing.T) {
		w := setup()
		txn := w.WriteTxn()
		defer txn.Abort()
		err := w.DeleteService(txn, bogus, lb.SourceK8s)
		_, _, found := w.Services().Get(txn, ServiceByName.Query(real))
		if err == nil && !found {
			t.Fatalf("DeleteService(%q (invalid)) returned no error and deleted the real service %s", bogus, real)
		}
	})
}

// An unknown source is bad input, an error, for every method.
func TestUnknownSourceRejected(t *testing.T) {
	w := newTestWriter(t)
	txn := w.WriteTxn()
	defer txn.Abort()
	for name, err := range map[string]error{
		"DeleteSource(0)":        w.DeleteSource(txn, lb.Source(0)),
		"DeleteService(a, 99)":   w.DeleteService(txn, nameA, lb.Source(99)),
		"ReleaseBackends(a, 99)": w.ReleaseBackends(txn, nameA, lb.Source(99), backend1),
		"ClearRedirect(a, 0)":    w.ClearRedirect(txn, nameA, lb.Source(0)),
	} {
		if err == nil {
			t.Errorf("%s: no error for an unknown source", name)
		}
	}
}

// The Writer keeps copies of the caller's slices (ServiceParams.Frontends,
// BackendParams.PortNames, ...), so a caller reusing and changing its
// params value changes nothing in the tables until it upserts again.
func TestRowsDoNotShareCallerSlices(t *testing.T) {
	t.Run("ServiceParams.Frontends", func(t *testing.T) {
		w := newTestWriter(t)
		params := lb.ServiceParams{Name: nameA, Source: lb.SourceK8s,
			Frontends: []lb.FrontendParams{{Address: vip1, Type: lb.SVCTypeClusterIP}}}
		mustWrite(t, w, func(txn statedb.WriteTxn) error { return w.UpsertService(txn, params) })

		params.Frontends[0].Address = vip2 // the caller's own copy, it thinks
		mustWrite(t, w, func(txn statedb.WriteTxn) error { return w.UpsertService(txn, params) })

		if err := checkInvariants(w, w.db.ReadTxn(), 0); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("BackendParams.PortNames", func(t *testing.T) {
		w := newTestWriter(t)
		mustWrite(t, w, func(txn statedb.WriteTxn) error {
			return w.UpsertService(txn, lb.ServiceParams{Name: nameA, Source: lb.SourceK8s,
				Frontends: []lb.FrontendParams{{Address: vip1, Type: lb.SVCTypeClusterIP, PortName: "http"}}})
		})
		names := []string{"http"}
		be := lb.BackendParams{Address: backend1, Weight: 100}.WithPortNames(names...)
		mustWrite(t, w, func(txn statedb.WriteTxn) error { return w.UpsertBackends(txn, nameA, lb.SourceK8s, be) })

		names[0] = "metrics" // the caller reuses its list: the backend no longer serves http
		if got := be.PortNames(); got[0] != "http" {
			t.Errorf("params kept the caller's list: port names %v after the caller changed it", got)
		}
		be = be.WithPortNames(names...)
		mustWrite(t, w, func(txn statedb.WriteTxn) error { return w.UpsertBackends(txn, nameA, lb.SourceK8s, be) })

		fe, _, _ := w.Frontends().Get(w.db.ReadTxn(), FrontendByAddress.Query(vip1))
		if len(fe.Backends) != 0 {
			t.Errorf("frontend (port http) still selects %v after its only backend was upserted with portNames [metrics]", fe.Backends)
		}
		if err := compareWithRebuild(w, w.db.ReadTxn()); err != nil {
			t.Error(err)
		}
	})
}

// Registering an initializer name twice is an error, not a panic.
func TestInitializerRegisteredOnce(t *testing.T) {
	w := newTestWriter(t)
	if _, err := w.RegisterInitializer("k8s"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.RegisterInitializer("k8s"); err == nil || err.Error() != `initializer "k8s": already registered` {
		t.Fatalf("second registration: %v", err)
	}
}
