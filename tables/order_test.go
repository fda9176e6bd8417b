package tables

import (
	"fmt"
	"slices"
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
)

// TestArrivalOrder applies the same six inputs in every order (720 of
// them) and checks that the frontends and services come out the same.
func TestArrivalOrder(t *testing.T) {
	var (
		web   = lb.NewServiceName("default", "web")
		local = lb.NewServiceName("default", "web-local")
		other = lb.NewServiceName("default", "other")
		vip   = lb.MustParseL3n4Addr("10.96.0.1:80/TCP")
		// web takes the kvstore backends: it is global.
		global = map[string]string{lb.AnnotationGlobal: "true"}
	)
	backend := func(addr string, w uint16) lb.BackendParams {
		return lb.BackendParams{Address: lb.MustParseL3n4Addr(addr), Weight: w}.WithPortNames("http")
	}
	inputs := []struct {
		name  string
		apply func(w *Writer, txn statedb.WriteTxn) error
	}{
		{"service k8s", func(w *Writer, txn statedb.WriteTxn) error {
			return w.UpsertService(txn, lb.ServiceParams{Name: web, Source: lb.SourceK8s, Annotations: global,
				Frontends: []lb.FrontendParams{{Address: vip, Type: lb.SVCTypeClusterIP, PortName: "http"}}})
		}},
		{"service api", func(w *Writer, txn statedb.WriteTxn) error {
			return w.UpsertService(txn, lb.ServiceParams{Name: web, Source: lb.SourceAPI, Algorithm: lb.AlgorithmMaglev, Annotations: global,
				Frontends: []lb.FrontendParams{
					{Address: vip, Type: lb.SVCTypeClusterIP, PortName: "http"},
					{Address: vip.WithPort(81), Type: lb.SVCTypeClusterIP, PortName: "http"},
				}})
		}},
		{"conflicting service", func(w *Writer, txn statedb.WriteTxn) error {
			return w.UpsertService(txn, lb.ServiceParams{Name: other, Source: lb.SourceK8s,
				Frontends: []lb.FrontendParams{
					{Address: vip.WithPort(81), Type: lb.SVCTypeClusterIP, PortName: "http"},
					{Address: lb.MustParseL3n4Addr("10.96.0.2:80/TCP"), Type: lb.SVCTypeClusterIP, PortName: "http"},
				}})
		}},
		{"backends k8s", func(w *Writer, txn statedb.WriteTxn) error {
			return w.UpsertBackends(txn, web, lb.SourceK8s, backend("10.0.0.1:8080/TCP", 100), backend("10.0.0.2:8080/TCP", 100))
		}},
		{"backends kvstore", func(w *Writer, txn statedb.WriteTxn) error {
			return w.UpsertBackends(txn, web, lb.SourceKVStore, backend("10.0.0.2:8080/TCP", 5), backend("10.1.0.1:8080/TCP", 100))
		}},
		{"redirect and its backends", func(w *Writer, txn statedb.WriteTxn) error {
			if err := w.UpsertBackends(txn, local, lb.SourceRedirect, backend("10.0.9.1:8080/TCP", 100)); err != nil {
				return err
			}
			return w.SetRedirect(txn, other, lb.Redirect{Source: lb.SourceRedirect, To: local})
		}},
	}

	var want string
	order := make([]int, len(inputs))
	for i := range order {
		order[i] = i
	}
	count := 0
	permute(order, 0, func(order []int) {
		count++
		w := newTestWriter(t)
		for _, i := range order {
			mustWrite(t, w, func(txn statedb.WriteTxn) error { return inputs[i].apply(w, txn) })
		}
		txn := w.db.ReadTxn()
		got := frontendsDump(w, txn) + conflictsDump(w, txn)
		if want == "" {
			want = got
			t.Logf("end state:\n%s", want)
			return
		}
		if got != want {
			names := make([]string, len(order))
			for j, i := range order {
				names[j] = inputs[i].name
			}
			t.Fatalf("order %v gives\n%s\nwant\n%s", names, got, want)
		}
	})
	if count != 720 {
		t.Fatalf("played %d orders, want 720", count)
	}
	// The end state itself: the api declaration of default/web is in force
	// and wins :81 over default/other (api outranks k8s); web's backends
	// merge both sources, k8s's weight for the shared 10.0.0.2 outranking
	// kvstore's; default/other keeps its own address, redirected.
	wantRows := fmt.Sprint(
		"10.96.0.1:80/TCP | ClusterIP | default/web | http | 10.0.0.1:8080/TCP, 10.0.0.2:8080/TCP, 10.1.0.1:8080/TCP |  |  policy=api\n",
		"10.96.0.1:81/TCP | ClusterIP | default/web | http | 10.0.0.1:8080/TCP, 10.0.0.2:8080/TCP, 10.1.0.1:8080/TCP |  |  policy=api\n",
		"10.96.0.2:80/TCP | ClusterIP | default/other | http | 10.0.9.1:8080/TCP | default/web-local |  policy=k8s\n",
		"default/other [frontend 10.96.0.1:81/TCP is owned by service default/web]\n",
		"default/web []\n",
	)
	if want != wantRows {
		t.Fatalf("end state\n%s\nwant\n%s", want, wantRows)
	}
}

// permute calls fn with every permutation of xs[k:] (Heap's algorithm
// would do too; this is the plain recursive swap).
func permute(xs []int, k int, fn func([]int)) {
	if k == len(xs) {
		fn(xs)
		return
	}
	for i := k; i < len(xs); i++ {
		xs[k], xs[i] = xs[i], xs[k]
		permute(xs, k+1, fn)
		xs[k], xs[i] = xs[i], xs[k]
	}
}

// A Batch writes the frontend rows of the services it changed in order of
// service name, whatever the order of its calls: the reconciler, which
// takes them in the order of their revisions, then numbers them the same
// way every time. It deletes the rows of the addresses nobody claims any
// more in the order its calls named them (the same calls, the same
// order; IDs are not handed out by the order they were freed in, so a
// sort would buy nothing).
func TestBatchWritesFrontendsInOrder(t *testing.T) {
	w := newTestWriter(t)
	svc := func(i int) lb.ServiceParams {
		p, _ := benchService(i, 0)
		return p
	}
	// Names that do not sort as their numbers, nor as their addresses.
	calls := []int{7, 3, 12, 0, 25, 9, 1, 100, 256}
	byName := slices.Clone(calls)
	slices.SortFunc(byName, func(a, b int) int { return svc(a).Name.Compare(svc(b).Name) })
	if slices.Equal(byName, calls) {
		t.Fatal("the test's calls are in order already")
	}
	of := func(fe *lb.Frontend) int {
		return calls[slices.IndexFunc(calls, func(i int) bool { return svc(i).Name == fe.Service })]
	}
	batch := func(call func(txn statedb.WriteTxn, i int) error) statedb.ReadTxn {
		t.Helper()
		txn := w.WriteTxn()
		err := w.Batch(txn, func() error {
			for _, i := range calls {
				if err := call(txn, i); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return txn.Commit()
	}

	rtxn := batch(func(txn statedb.WriteTxn, i int) error { return w.UpsertService(txn, svc(i)) })
	var written []int
	for fe := range w.Frontends().LowerBound(rtxn, statedb.ByRevision[*lb.Frontend](0)) {
		written = append(written, of(fe))
	}
	if !slices.Equal(written, byName) {
		t.Errorf("frontends written in the order of services %v, want %v (by name)", written, byName)
	}

	txn := w.WriteTxn()
	changes, err := w.Frontends().Changes(txn)
	if err != nil {
		t.Fatal(err)
	}
	rtxn = txn.Commit()
	seen, _ := changes.Next(rtxn)
	for range seen { // the rows written so far
	}
	rtxn = batch(func(txn statedb.WriteTxn, i int) error { return w.DeleteService(txn, svc(i).Name, lb.SourceK8s) })
	var deleted []int
	next, _ := changes.Next(rtxn)
	for c := range next {
		if c.Deleted {
			deleted = append(deleted, of(c.Object))
		}
	}
	if !slices.Equal(deleted, calls) {
		t.Errorf("frontends deleted in the order of services %v, want %v (the calls')", deleted, calls)
	}
}
