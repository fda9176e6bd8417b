package tables

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
)

// conflictingCalls is a random Batch of Writer calls over services of
// two sources that claim a few shared addresses (each service one or
// two of them), so that a flush decides owners of
// addresses that several services contend for and deletes rows nobody
// claims any more.
func conflictingCalls(rng *rand.Rand) []func(w *Writer, txn statedb.WriteTxn) error {
	addr := func(i int) lb.L3n4Addr {
		return lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{10, 97, 0, byte(i + 1)}), 80, lb.ScopeExternal)
	}
	var calls []func(w *Writer, txn statedb.WriteTxn) error
	for range 1 + rng.IntN(8) {
		name := lb.NewServiceName("ns", fmt.Sprintf("svc-%d", rng.IntN(10)))
		src := []lb.Source{lb.SourceK8s, lb.SourceFile}[rng.IntN(2)]
		switch rng.IntN(3) {
		case 0, 1:
			p := lb.ServiceParams{Name: name, Source: src, Created: time.Unix(int64(rng.IntN(3)), 0)}
			for _, i := range rng.Perm(6)[:1+rng.IntN(2)] {
				p.Frontends = append(p.Frontends, lb.FrontendParams{Address: addr(i), Type: lb.SVCTypeClusterIP})
			}
			be := lb.BackendParams{
				Address: lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{10, 98, 0, byte(rng.IntN(4) + 1)}), 8080, lb.ScopeExternal),
				Weight:  lb.DefaultBackendWeight,
			}
			calls = append(calls, func(w *Writer, txn statedb.WriteTxn) error {
				if err := w.UpsertService(txn, p); err != nil {
					return err
				}
				return w.UpsertBackends(txn, name, src, be)
			})
		default:
			calls = append(calls, func(w *Writer, txn statedb.WriteTxn) error { return w.DeleteService(txn, name, src) })
		}
	}
	return calls
}

// frontendChanges runs batches of calls on a new Writer and returns, per
// batch, the frontend changes in the order the reconciler sees them
// (rows deleted and written, with owner and backends), and the
// frontends table after it.
func frontendChanges(t *testing.T, batches [][]func(w *Writer, txn statedb.WriteTxn) error) (changes, tables []string) {
	t.Helper()
	w := newTestWriter(t)
	txn := w.WriteTxn()
	iter, err := w.Frontends().Changes(txn)
	if err != nil {
		t.Fatal(err)
	}
	txn.Commit()
	row := func(fe *lb.Frontend) string {
		var bes []string
		for _, b := range fe.Backends {
			bes = append(bes, b.Address.String())
		}
		return fmt.Sprintf("%s %s %v", fe.Address, fe.Service, bes)
	}
	for _, calls := range batches {
		txn := w.WriteTxn()
		err := w.Batch(txn, func() error {
			for _, call := range calls {
				if err := call(w, txn); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		rtxn := txn.Commit()
		var b strings.Builder
		next, _ := iter.Next(rtxn)
		for c := range next {
			if c.Deleted {
				fmt.Fprintf(&b, "delete %s\n", c.Object.Address)
			} else {
				fmt.Fprintf(&b, "write %s\n", row(c.Object))
			}
		}
		changes = append(changes, b.String())
		var rows []string
		for fe := range w.Frontends().All(rtxn) {
			rows = append(rows, row(fe))
		}
		tables = append(tables, strings.Join(rows, "\n"))
	}
	return changes, tables
}

// The same Batches of calls, over services contending for shared
// addresses (and one service's declarations by two sources), make the same frontend
// changes in the same order on any Writer: who owns an address, and the
// order of the rows deleted (by the calls' order of the addresses) and
// written (by name), depend on the calls alone, not on the order of a
// map.
func TestSameBatchesChangeFrontendsInTheSameOrder(t *testing.T) {
	var trace strings.Builder // compared across versions with LBSTATE_ORDER_TRACE
	for seed := range uint64(100) {
		rng := rand.New(rand.NewPCG(seed, 9))
		var batches [][]func(w *Writer, txn statedb.WriteTxn) error
		for range 30 {
			batches = append(batches, conflictingCalls(rng))
		}
		changes, tables := frontendChanges(t, batches)
		for range 3 {
			again, _ := frontendChanges(t, batches)
			for i := range changes {
				if again[i] != changes[i] {
					t.Fatalf("seed %d batch %d: changes\n%s\nthen\n%s", seed, i, changes[i], again[i])
				}
			}
		}
		for i := range changes {
			lines := strings.Split(changes[i], "\n")
			slices.Sort(lines) // the old order of deletes was by address
			fmt.Fprintf(&trace, "seed %d batch %d\n%s\n%s\n", seed, i, strings.Join(lines, "\n"), tables[i])
		}
	}
	if path := os.Getenv("LBSTATE_ORDER_TRACE"); path != "" {
		if err := os.WriteFile(path, []byte(trace.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
