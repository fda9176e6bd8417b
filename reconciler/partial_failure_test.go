package reconciler_test

// Partial failures: a batched map operation may fail after applying a
// prefix of its entries (the bpf.Map contract allows it, and the kernel
// does it). Whatever the retry or the next version of a frontend does, the
// maps end consistent: no slot names a missing backend, no master counts a
// missing slot.

import (
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// flakyServices makes lb_services' BatchDelete, while armed, delete only
// the first key and then fail, as the kernel and memory maps (with Faults)
// may.
type flakyServices struct {
	bpf.Map[bpf.ServiceKey, bpf.ServiceValue]
	armed atomic.Bool
	fired atomic.Int32
}

func (f *flakyServices) BatchDelete(ks []bpf.ServiceKey) error {
	if f.armed.Load() && len(ks) > 1 {
		f.fired.Add(1)
		if err := f.Map.Delete(ks[0]); err != nil {
			return err
		}
		return fmt.Errorf("%s: batch delete: injected failure after 1 of %d keys", f.Name(), len(ks))
	}
	return f.Map.BatchDelete(ks)
}

func withFlakyServices(maps *bpf.Maps) (*bpf.Maps, *flakyServices) {
	m := *maps
	f := &flakyServices{Map: maps.Services}
	m.Services = f
	return &m, f
}

func waitFired(t *testing.T, f *flakyServices) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for f.fired.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the injected BatchDelete failure never fired")
		}
		time.Sleep(time.Millisecond)
	}
}

// pastInline returns backends for the inline slots (bpf.InlineSlots) and
// n more, whose slots have entries of their own: the batched writes and
// deletes these tests break are of those entries.
func pastInline(n int) []lb.BackendParams {
	var out []lb.BackendParams
	for i := range bpf.InlineSlots + n {
		out = append(out, be(fmt.Sprintf("10.3.0.%d:8080/TCP", i+1)))
	}
	return out
}

// A frontend that grows back before the retry of a shrink whose slot
// delete failed part way gets all its slots written. (The update once
// trusted the slots it had last written, still all four, wrote none, and
// left a master counting a missing slot for good.)
func TestSlotsRewrittenAfterPartialShrink(t *testing.T) {
	slotsRewrittenAfter(t, "grow", "10.96.5.1:80/TCP", func(w *tables.Writer, txn statedb.WriteTxn) error {
		return upsert(w, txn, "grow", "10.96.5.1:80/TCP", lb.AlgorithmRandom, false, pastInline(2)...)
	})
}

// A frontend declared again, with the same backends, before the retry of
// a delete that failed part way (master and slot 1 gone) gets all its
// slots written. (The update once found its slots unchanged, wrote none,
// and left a master counting a missing slot for good.)
func TestSlotsRewrittenAfterPartialDelete(t *testing.T) {
	slotsRewrittenAfter(t, "readd", "10.96.5.2:80/TCP", func(w *tables.Writer, txn statedb.WriteTxn) error {
		return w.DeleteService(txn, lb.NewServiceName("test", "readd"), lb.SourceK8s)
	})
}

// slotsRewrittenAfter declares service name with four backends past the
// inline slots, makes change with lb_services' batched deletes failing
// part way, declares the backends again before the retry, and checks the
// maps at rest.
func slotsRewrittenAfter(t *testing.T, name, vip string, change func(*tables.Writer, statedb.WriteTxn) error) {
	onBothMapKinds(t, func(t *testing.T, raw *bpf.Maps, _ func() *bpf.Maps) {
		maps, flaky := withFlakyServices(raw)
		a := newAgent(t, maps, nil)
		a.start(t)
		defer a.stop(t)
		a.write(t, func(txn statedb.WriteTxn) error {
			return upsert(a.w, txn, name, vip, lb.AlgorithmRandom, false, pastInline(4)...)
		})
		a.waitDone(t, 10*time.Second)

		flaky.armed.Store(true)
		a.write(t, func(txn statedb.WriteTxn) error { return change(a.w, txn) })
		waitFired(t, flaky)
		a.write(t, func(txn statedb.WriteTxn) error {
			return upsert(a.w, txn, name, vip, lb.AlgorithmRandom, false, pastInline(4)...)
		})
		a.waitDone(t, 10*time.Second)
		flaky.armed.Store(false)
		a.waitDone(t, 10*time.Second)
		if v := checkMaps(raw); v != "" {
			t.Fatalf("at rest, after the frontend came back to its four backends: %s\n%s", v, dumpText(t, raw))
		}
	})
}

// flakyRevNat fails lb_rev_nat updates while armed.
type flakyRevNat struct {
	bpf.Map[uint32, bpf.RevNatValue]
	armed atomic.Bool
}

func (f *flakyRevNat) Update(k uint32, v bpf.RevNatValue) error {
	if f.armed.Load() {
		return fmt.Errorf("%s: update: injected failure", f.Name())
	}
	return f.Map.Update(k, v)
}

func (f *flakyRevNat) BatchUpdate(ks []uint32, vs []bpf.RevNatValue) error {
	if f.armed.Load() && len(ks) > 0 {
		return fmt.Errorf("%s: batch update: injected failure", f.Name())
	}
	return f.Map.BatchUpdate(ks, vs)
}

// A frontend with session affinity whose update failed after its master
// went in (the lb_rev_nat write failed) still has its affinity entries
// cleared when it is deleted, before its backend is: no affinity entry
// outlives the backend it names. (Affinity entries were once known to
// exist only once the whole update succeeded, and the delete skipped
// them.)
func TestAffinityClearedOnDeleteAfterFailedUpdate(t *testing.T) {
	raw := memoryMaps(t)
	m := *raw
	flaky := &flakyRevNat{Map: raw.RevNat}
	flaky.armed.Store(true)
	m.RevNat = flaky
	a := newAgent(t, &m, nil)
	a.start(t)
	defer a.stop(t)
	vip := addr("10.96.10.1:80/TCP")
	a.write(t, func(txn statedb.WriteTxn) error {
		return upsert(a.w, txn, "sticky", vip.String(), lb.AlgorithmRandom, true, be("10.8.0.1:8080/TCP"))
	})
	var master bpf.ServiceValue
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, ok, _ := raw.Services.Lookup(bpf.NewServiceKey(vip, 0))
		if ok {
			master = v
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("master never written")
		}
		time.Sleep(time.Millisecond)
	}
	slot := struct{ BackendID uint32 }{master.Backends[0]} // slot 1, inline
	client := bpf.AffinityKey{Client: netip.MustParseAddr("192.0.2.7").As16(), RevNatID: master.RevNatID}
	if err := raw.Affinity.Update(client, bpf.AffinityValue{BackendID: slot.BackendID}); err != nil {
		t.Fatal(err)
	}
	a.write(t, func(txn statedb.WriteTxn) error {
		n := lb.NewServiceName("test", "sticky")
		if err := a.w.DeleteService(txn, n, lb.SourceK8s); err != nil {
			return err
		}
		return a.w.ReleaseBackends(txn, n, lb.SourceK8s, addr("10.8.0.1:8080/TCP"))
	})
	a.waitDone(t, 10*time.Second)
	flaky.armed.Store(false)
	d := dumpText(t, raw)
	if _, ok, _ := raw.Backends.Lookup(slot.BackendID); !ok {
		if v, ok, _ := raw.Affinity.Lookup(client); ok {
			t.Fatalf("backend %d was deleted while an affinity entry of the deleted frontend still names it (%+v):\n%s", slot.BackendID, v, d)
		}
	}
}
