package k8s

// A batch is committed with its invalid objects rejected one by one, or,
// at any other error, not at all.

import (
	"errors"
	"testing"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// faultRow lives in a table that the reflector's transactions do not
// lock: writing it from a batch fails the way a table write fails.
type faultRow struct{ name string }

func (faultRow) TableHeader() []string { return []string{"name"} }
func (f faultRow) TableRow() []string  { return []string{f.name} }

func clusterIPService(name, ip string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec:       corev1.ServiceSpec{ClusterIP: ip, Ports: []corev1.ServicePort{{Port: 80}}},
	}
}

// A table write that fails in the middle of a batch aborts the whole
// batch: nothing of it is committed (not the services before the
// failure, not those after), nothing is counted as rejected input, and
// no later batch is written over it (the source's job starts over).
func TestReflectorNeverCommitsABatchWithAnInternalError(t *testing.T) {
	w, db, cfg := newTestTables(t, "n1")
	faults, err := statedb.NewTable(db, "faults", statedb.Index[faultRow, string]{
		Name:       "name",
		FromObject: func(f faultRow) index.KeySet { return index.NewKeySet(index.String(f.name)) },
		FromKey:    index.String,
		FromString: index.FromString,
		Unique:     true,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := newTestReflector(t, cfg, w)

	ws := r.prepare([]event{{obj: clusterIPService("a", "10.96.0.1")}, {obj: labelledSlice("a-1", "a", "10.0.0.1")}})
	ws.add(func(txn statedb.WriteTxn) {
		_, _, err := faults.Insert(txn, faultRow{"x"}) // not locked: fails
		r.check(err, "fault x")
	})
	ws.join(r.prepare([]event{{obj: clusterIPService("b", "10.96.0.2")}}))
	r.writeOrStop(ws)

	err = r.failure()
	if err == nil || errors.Is(err, tables.ErrInvalid) || !errors.Is(err, statedb.ErrTableNotLockedForWriting) {
		t.Fatalf("failed batch: error %v, want the table's (not invalid input)", err)
	}
	txn := db.ReadTxn()
	if n, m := w.Services().NumObjects(txn), w.Backends().NumObjects(txn); n != 0 || m != 0 {
		t.Errorf("after the failed batch: %d services and %d backends committed, want none", n, m)
	}
	if n := r.src.Errors(); n != 0 {
		t.Errorf("%d objects rejected, want 0 (nothing was invalid)", n)
	}

	r.apply([]event{{obj: clusterIPService("c", "10.96.0.3")}})
	if n := w.Services().NumObjects(db.ReadTxn()); n != 0 {
		t.Errorf("a batch after the failed one was committed (%d services)", n)
	}
}

// An invalid object is rejected alone: counted, and the rest of its
// batch committed.
func TestReflectorRejectsAnInvalidObjectAloneAndCommitsTheRest(t *testing.T) {
	w, db, cfg := newTestTables(t, "n1")
	r := newTestReflector(t, cfg, w)
	r.apply([]event{
		{obj: clusterIPService("a", "10.96.0.1")},
		{obj: clusterIPService("bad", "10.96.0.nope")},
		{obj: clusterIPService("b", "10.96.0.2")},
	})
	if err := r.failure(); err != nil {
		t.Fatalf("batch with invalid input failed: %v", err)
	}
	if n := r.src.Errors(); n != 1 {
		t.Errorf("%d objects rejected, want 1", n)
	}
	txn := db.ReadTxn()
	for _, name := range []string{"a", "b"} {
		if _, _, ok := w.Services().Get(txn, tables.ServiceByName.Query(lb.NewServiceName("ns", name))); !ok {
			t.Errorf("service ns/%s not committed", name)
		}
	}
	if _, _, ok := w.Services().Get(txn, tables.ServiceByName.Query(lb.NewServiceName("ns", "bad"))); ok {
		t.Error("invalid service ns/bad committed")
	}
}
