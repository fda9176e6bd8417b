package tables

// Review tests: each demonstrates a suspected bug and FAILS on the current
// code. See the report for the expected behaviour.

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
		if s.Redirect != nil {
			redirects += fmt.Sprintf("%s -> %s\n", s.Name, s.Redirect)
		}
	}
	return frontendsDump(w, txn) + conflictsDump(w, txn) + redirects
}

// Two sources setting a redirect on one service: the outcome depends on
// the order ("every order of the same inputs gives the same tables").
func TestReviewRedirectTwoSourcesOrderDependent(t *testing.T) {
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

// A redirect set by one source is silently dropped when another source
// sets one; deleting the second source then leaves no redirect at all,
// although the first source never cleared its redirect ("Only the source
// that set a redirect can clear it"; "DeleteSource removes that source's
// ... redirects, and nothing else").
func TestReviewRedirectOverwrittenByOtherSource(t *testing.T) {
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

// SetRedirect does not validate the redirected service's name. A zero
// name is accepted and written, and a name whose parts contain '/' prints
// like (and is looked up as) a different, real service, which then gets
// the redirect. DeleteService has the same aliasing.
func TestReviewUnvalidatedServiceName(t *testing.T) {
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
	bogus := lb.NewServiceName("c2", "other/a")                // also prints c2/other/a; Validate rejects it
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
			t.Fatalf("SetRedirect(%q (invalid)) returned no error; service %s now has redirect %v", bogus, real, svc.Redirect)
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

// Bad input (an unknown source) to the delete/release methods is not an
// error; README: "Bad input returns an error that names the object and
// field".
func TestReviewBadSourceNotRejected(t *testing.T) {
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

// The Writer keeps the caller's slices (ServiceParams.Frontends,
// BackendParams.PortNames, ...) in the rows it inserts. A caller reusing
// its params value mutates rows already in the table, outside any
// transaction, and the next upsert of the (changed) params is then
// skipped as "equal": the tables are left inconsistent.
func TestReviewCallerSlicesAliasedIntoRows(t *testing.T) {
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

// RegisterInitializer panics (inside statedb) when a name is registered
// twice, instead of reporting it.
func TestReviewRegisterInitializerTwicePanics(t *testing.T) {
	w := newTestWriter(t)
	w.RegisterInitializer("k8s")
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("RegisterInitializer(%q) twice panics: %v", "k8s", r)
		}
	}()
	w.RegisterInitializer("k8s")
}
