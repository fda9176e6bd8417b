package tables

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
)

// rowPrint re-reads one row, whole (a service's backend addresses
// included), to tell whether it changed since it was taken.
type rowPrint struct {
	what, was string
	now       func() string
}

// committedRows prints every row of txn.
func committedRows(w *Writer, txn statedb.ReadTxn) []rowPrint {
	var out []rowPrint
	add := func(what string, now func() string) { out = append(out, rowPrint{what, now(), now}) }
	for s := range w.Services().All(txn) {
		add("service "+s.Name.String(), func() string { j, _ := json.Marshal(s); return fmt.Sprint(string(j), s.BackendAddrs()) })
	}
	for b := range w.Backends().All(txn) {
		add("backend "+b.Address.String(), func() string { j, _ := json.Marshal(b); return string(j) })
	}
	for fe := range w.Frontends().All(txn) {
		add("frontend "+fe.Address.String(), func() string { j, _ := json.Marshal(fe); return fmt.Sprintf("%s %+v", j, *fe.Policy) })
	}
	for o := range w.t.orphans.All(txn) {
		add("orphan-backends "+o.Service.String(), func() string { return fmt.Sprint(o.Addrs) })
	}
	return out
}

// Rows are immutable once committed: a later batch, which changes the
// rows it inserted itself in place, never changes one a reader may hold,
// nor does an unbatched call.
func TestBatchNeverChangesCommittedRows(t *testing.T) {
	forSeeds(t, 10, 2, func(t *testing.T, seed uint64) {
		w := newTestWriter(t)
		g := &opGen{data: randomBytes(5000+seed, 3000)}
		var history []string
		var held []rowPrint
		for !g.done() {
			txn := w.WriteTxn()
			n, batched := 1+g.next(12), g.next(4) != 0
			calls := func() error {
				for range n {
					desc, _, apply := g.op()
					history = append(history, desc)
					if err := apply(w, txn); err != nil {
						return fmt.Errorf("%s: %w", desc, err)
					}
				}
				return nil
			}
			var err error
			if batched {
				err = w.Batch(txn, calls)
			} else {
				err = calls()
			}
			if err != nil {
				txn.Abort()
				t.Fatal(err)
			}
			history = append(history, fmt.Sprintf("-- commit (batch: %v)", batched))
			rtxn := txn.Commit()
			for _, r := range held {
				if now := r.now(); now != r.was {
					t.Fatalf("committed %s changed:\nwas %s\nnow %s\nops:\n  %s", r.what, r.was, now, strings.Join(history, "\n  "))
				}
			}
			if len(held) > 4000 {
				held = held[len(held)-2000:]
			}
			held = append(held, committedRows(w, rtxn)...)
		}
	})
}

// A batch whose transaction is aborted leaves no trace in the Writer
// (its pooled scratch space, the rows it owned, the orphan-backends it
// deferred): the next batches give the tables that the committed calls
// alone give, made one by one. So does a batch whose fn fails and whose
// transaction is committed anyway.
func TestAbortedBatchLeavesNoTrace(t *testing.T) {
	forSeeds(t, 10, 2, func(t *testing.T, seed uint64) {
		w, ref := newTestWriter(t), newTestWriter(t)
		g := &opGen{data: randomBytes(9000+seed, 3000)}
		var history []string
		errFn := errors.New("fn fails")
		for !g.done() {
			n, abort, fail := 1+g.next(12), g.next(3) == 0, g.next(4) == 0
			type call struct {
				desc  string
				apply func(*Writer, statedb.WriteTxn) error
			}
			var calls []call
			for range n {
				desc, _, apply := g.op()
				calls = append(calls, call{desc, apply})
			}
			txn := w.WriteTxn()
			err := w.Batch(txn, func() error {
				for _, c := range calls {
					if err := c.apply(w, txn); err != nil {
						return fmt.Errorf("%s: %w", c.desc, err)
					}
				}
				if fail {
					return errFn
				}
				return nil
			})
			if !errors.Is(err, errFn) && err != nil {
				txn.Abort()
				t.Fatal(err)
			}
			if abort {
				txn.Abort()
				history = append(history, fmt.Sprintf("-- aborted a batch of %d", n))
				continue
			}
			refTxn := ref.WriteTxn()
			for _, c := range calls {
				history = append(history, c.desc)
				if err := c.apply(ref, refTxn); err != nil {
					txn.Abort()
					refTxn.Abort()
					t.Fatal(err)
				}
			}
			history = append(history, "-- commit")
			rtxn, refRtxn := txn.Commit(), refTxn.Commit()
			err = checkInvariants(w, rtxn, 0)
			if err == nil {
				err = compareTables(w, rtxn, ref, refRtxn)
			}
			if err != nil {
				t.Fatalf("%v\nops:\n  %s", err, strings.Join(history, "\n  "))
			}
		}
	})
}

// clusterOrRead generates a call the opGen does not: a cluster's
// backends, a sweep, or a read of a service's backends and row, whose
// result is returned to compare.
func (g *opGen) clusterOrRead() (string, func(*Writer, statedb.WriteTxn) (string, error)) {
	name, src := genNames[g.next(len(genNames))], genSources[g.next(len(genSources))]
	switch g.next(5) {
	case 0:
		id, bs := uint32(g.next(3)), g.backends()
		for i := range bs {
			bs[i].ClusterID = id
		}
		return fmt.Sprintf("SetClusterBackends(%s, %s, %d, %d)", name, src, id, len(bs)), func(w *Writer, txn statedb.WriteTxn) (string, error) {
			return "", w.SetClusterBackends(txn, name, src, id, bs...)
		}
	case 1:
		id := uint32(g.next(3))
		return fmt.Sprintf("DeleteSourceCluster(%s, %d)", src, id), func(w *Writer, txn statedb.WriteTxn) (string, error) {
			return "", w.DeleteSourceCluster(txn, src, id)
		}
	case 2:
		return fmt.Sprintf("SweepSource(%s, keep %s)", src, name), func(w *Writer, txn statedb.WriteTxn) (string, error) {
			return "", w.SweepSource(txn, src, func(n lb.ServiceName) bool { return n == name })
		}
	}
	return fmt.Sprintf("read(%s)", name), func(w *Writer, txn statedb.WriteTxn) (string, error) {
		var sb strings.Builder
		for b := range w.BackendsOf(txn, name) {
			fmt.Fprint(&sb, b.Address, " ")
		}
		if s, _, found := w.Services().Get(txn, ServiceByName.Query(name)); found {
			fmt.Fprint(&sb, "row ", s.BackendAddrs(), len(s.Params), len(s.Redirects()))
		}
		return sb.String(), nil
	}
}

// Inside a batch, a service's backends read back as they do without one
// (those of a service without a row included, which the batch keeps
// aside until its end), through cluster calls and sweeps too, and the
// tables end up the same.
func TestBatchReadsBackendsAsUnbatched(t *testing.T) {
	playBatches(t, 11000, 12, false, func(g *opGen, w, ref *Writer, txn, refTxn statedb.WriteTxn) (string, error) {
		if g.next(3) != 0 {
			return sameCall(g, w, ref, txn, refTxn)
		}
		desc, apply := g.clusterOrRead()
		got, err := apply(w, txn)
		if err != nil {
			return desc, fmt.Errorf("%s: %w", desc, err)
		}
		want, err := apply(ref, refTxn)
		if err != nil {
			return desc, fmt.Errorf("%s (unbatched): %w", desc, err)
		}
		if got != want {
			return desc, fmt.Errorf("%s: %q in a batch, %q without", desc, got, want)
		}
		return desc, nil
	})
}
