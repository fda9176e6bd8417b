package tables

// Regression tests for bugs a review found: per-source redirects, input
// validation, caller slices kept in rows, initializer registration.

import (
	"fmt"
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
)

var (
	rvA    = lb.NewServiceName("default", "a")
	rvB    = lb.NewServiceName("default", "b")
	rvC    = lb.NewServiceName("default", "c")
	rvVIP  = lb.MustParseL3n4Addr("10.96.0.1:80/TCP")
	rvVIP2 = lb.MustParseL3n4Addr("10.96.0.2:80/TCP")
	rvBE1  = lb.MustParseL3n4Addr("10.0.0.1:80/TCP")
	rvBE2  = lb.MustParseL3n4Addr("10.0.0.2:80/TCP")
	rvBE3  = lb.MustParseL3n4Addr("10.0.0.3:80/TCP")
)

func rvState(w *Writer) string {
	txn := w.db.ReadTxn()
	var redirects string
	for s := range w.Services().All(txn) {
		for _, r := range s.Redirects {
			redirects += fmt.Sprintf("%s -> %s\n", s.Name, r)
		}
	}
	return frontendsDump(w, txn) + conflictsDump(w, txn) + redirects
}

// Two sources setting a redirect on one service give the same tables in
// either order: the higher-priority source's redirect is in force.
func TestRedirectsFromTwoSourcesInEitherOrder(t *testing.T) {
	setup := func() *Writer {
		w := newTestWriter(t)
		mustWrite(t, w, func(txn statedb.WriteTxn) error {
			if err := w.UpsertService(txn, lb.ServiceParams{Name: rvA, Source: lb.SourceK8s,
				Frontends: []lb.FrontendParams{{Address: rvVIP, Type: lb.SVCTypeClusterIP}}}); err != nil {
				return err
			}
			if err := w.UpsertBackends(txn, rvB, lb.SourceK8s, lb.BackendParams{Address: rvBE2, Weight: 100}); err != nil {
				return err
			}
			return w.UpsertBackends(txn, rvC, lb.SourceK8s, lb.BackendParams{Address: rvBE3, Weight: 100})
		})
		return w
	}
	apiRedirect := lb.Redirect{Source: lb.SourceAPI, To: rvB}
	lrpRedirect := lb.Redirect{Source: lb.SourceRedirect, To: rvC}

	w1 := setup()
	mustWrite(t, w1, func(txn statedb.WriteTxn) error { return w1.SetRedirect(txn, rvA, apiRedirect) })
	mustWrite(t, w1, func(txn statedb.WriteTxn) error { return w1.SetRedirect(txn, rvA, lrpRedirect) })

	w2 := setup()
	mustWrite(t, w2, func(txn statedb.WriteTxn) error { return w2.SetRedirect(txn, rvA, lrpRedirect) })
	mustWrite(t, w2, func(txn statedb.WriteTxn) error { return w2.SetRedirect(txn, rvA, apiRedirect) })

	if s1, s2 := rvState(w1), rvState(w2); s1 != s2 {
		t.Fatalf("same inputs, different order, different tables:\n--- api then redirect\n%s--- redirect then api\n%s", s1, s2)
	}
}

// A redirect set by one source survives another source setting and then
// dropping its own: only the source that set a redirect can clear it.
func TestRedirectSurvivesOtherSource(t *testing.T) {
	w := newTestWriter(t)
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		if err := w.UpsertService(txn, lb.ServiceParams{Name: rvA, Source: lb.SourceK8s,
			Frontends: []lb.FrontendParams{{Address: rvVIP, Type: lb.SVCTypeClusterIP}}}); err != nil {
			return err
		}
		if err := w.UpsertBackends(txn, rvB, lb.SourceK8s, lb.BackendParams{Address: rvBE2, Weight: 100}); err != nil {
			return err
		}
		return w.UpsertBackends(txn, rvC, lb.SourceK8s, lb.BackendParams{Address: rvBE3, Weight: 100})
	})
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		return w.SetRedirect(txn, rvA, lb.Redirect{Source: lb.SourceAPI, To: rvB})
	})
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		return w.SetRedirect(txn, rvA, lb.Redirect{Source: lb.SourceRedirect, To: rvC})
	})
	mustWrite(t, w, func(txn statedb.WriteTxn) error { return w.DeleteSource(txn, lb.SourceRedirect) })

	txn := w.db.ReadTxn()
	fe, _, _ := w.Frontends().Get(txn, FrontendByAddress.Query(rvVIP))
	if fe.RedirectedTo != rvB {
		t.Fatalf("after DeleteSource(redirect): frontend redirected to %q, want the api source's redirect to %s (api never cleared it)", fe.RedirectedTo, rvB)
	}
}

// Service names are validated: a zero name is rejected, and so is a name
// whose parts contain '/', which would print like (and be looked up as) a
// different, real service.
func TestServiceNamesValidated(t *testing.T) {
	t.Run("zero name", func(t *testing.T) {
		w := newTestWriter(t)
		txn := w.WriteTxn()
		defer txn.Abort()
		err := w.SetRedirect(txn, lb.ServiceName{}, lb.Redirect{Source: lb.SourceRedirect, To: rvB})
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
				Frontends: []lb.FrontendParams{{Address: rvVIP, Type: lb.SVCTypeClusterIP}}}); err != nil {
				return err
			}
			return w.UpsertBackends(txn, real, lb.SourceK8s, lb.BackendParams{Address: rvBE1, Weight: 100})
		})
		return w
	}

	t.Run("SetRedirect aliases another service", func(t *testing.T) {
		w := setup()
		txn := w.WriteTxn()
		defer txn.Abort()
		err := w.SetRedirect(txn, bogus, lb.Redirect{Source: lb.SourceRedirect, To: rvB})
		svc, _, _ := w.Services().Get(txn, ServiceByName.Query(real))
		if err == nil {
			t.Fatalf("SetRedirect(%q (invalid)) returned no error; service %s now has redirects %v", bogus, real, svc.Redirects)
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
		"DeleteService(a, 99)":   w.DeleteService(txn, rvA, lb.Source(99)),
		"ReleaseBackends(a, 99)": w.ReleaseBackends(txn, rvA, lb.Source(99), rvBE1),
		"ClearRedirect(a, 0)":    w.ClearRedirect(txn, rvA, lb.Source(0)),
	} {
		if err == nil {
			t.Errorf("%s: no error for an unknown source", name)
		}
	}
}

// The Writer keeps copies of the caller's slices (ServiceParams.Frontends,
// BackendParams.PortNames, ...), so a caller reusing and changing its
// params value changes nothing in the tables until it upserts again.
func TestCallerSlicesNotKeptInRows(t *testing.T) {
	t.Run("ServiceParams.Frontends", func(t *testing.T) {
		w := newTestWriter(t)
		params := lb.ServiceParams{Name: rvA, Source: lb.SourceK8s,
			Frontends: []lb.FrontendParams{{Address: rvVIP, Type: lb.SVCTypeClusterIP}}}
		mustWrite(t, w, func(txn statedb.WriteTxn) error { return w.UpsertService(txn, params) })

		params.Frontends[0].Address = rvVIP2 // the caller's own copy, it thinks
		mustWrite(t, w, func(txn statedb.WriteTxn) error { return w.UpsertService(txn, params) })

		if err := checkInvariants(w, w.db.ReadTxn(), 0); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("BackendParams.PortNames", func(t *testing.T) {
		w := newTestWriter(t)
		mustWrite(t, w, func(txn statedb.WriteTxn) error {
			return w.UpsertService(txn, lb.ServiceParams{Name: rvA, Source: lb.SourceK8s,
				Frontends: []lb.FrontendParams{{Address: rvVIP, Type: lb.SVCTypeClusterIP, PortName: "http"}}})
		})
		be := lb.BackendParams{Address: rvBE1, Weight: 100, PortNames: []string{"http"}}
		mustWrite(t, w, func(txn statedb.WriteTxn) error { return w.UpsertBackends(txn, rvA, lb.SourceK8s, be) })

		be.PortNames[0] = "metrics" // the backend no longer serves http
		mustWrite(t, w, func(txn statedb.WriteTxn) error { return w.UpsertBackends(txn, rvA, lb.SourceK8s, be) })

		fe, _, _ := w.Frontends().Get(w.db.ReadTxn(), FrontendByAddress.Query(rvVIP))
		if len(fe.Backends) != 0 {
			t.Errorf("frontend (port http) still selects %v after its only backend was upserted with portNames [metrics]", fe.Backends)
		}
		if err := compareWithRebuild(w, w.db.ReadTxn()); err != nil {
			t.Error(err)
		}
	})
}

// Registering an initializer name twice is an error, not a panic.
func TestRegisterInitializerTwice(t *testing.T) {
	w := newTestWriter(t)
	if _, err := w.RegisterInitializer("k8s"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.RegisterInitializer("k8s"); err == nil || err.Error() != `initializer "k8s": already registered` {
		t.Fatalf("second registration: %v", err)
	}
}
