package reconciler

// Tests from a fourth review. Each test's comment describes the bug it
// demonstrates.

import (
	"context"
	"fmt"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// partialBackendsUpdate makes lb_backends' BatchUpdate, while armed,
// write the first entry only and then fail, as the Map contract allows
// (a prefix of the entries may have been applied).
type partialBackendsUpdate struct {
	bpf.Map[uint32, bpf.Backend]
	armed bool
	fired int
}

func (f *partialBackendsUpdate) BatchUpdate(ks []uint32, vs []bpf.Backend) error {
	if f.armed && len(ks) > 1 {
		f.armed = false
		f.fired++
		if err := f.Map.Update(ks[0], vs[0]); err != nil {
			return err
		}
		return fmt.Errorf("%s: batch update: injected failure after 1 of %d entries", f.Name(), len(ks))
	}
	return f.Map.BatchUpdate(ks, vs)
}

// writeBackends (reconciler/batch.go) now marks the backends of a failed
// BatchUpdate written=false, "written again when used". But releaseUnused
// (reconciler/ops.go), when a frontend drops a backend that others still
// use, rewrites the backend's value only if be.written: a backend left by
// a failed batch update keeps whatever the failed batch wrote.
//
// Frontend A sees backend X terminating. Frontend B's update makes X
// active (the most available state any frontend sees); the batch writes
// X and fails on B's other backend. B is then deleted (or its next
// version no longer has X): X's value must go back to what A sees, but
// releaseUnused skips the write because X is not marked written, and
// nothing writes it again until A itself changes.
func TestReview4FailedBatchUpdateLeavesSharedBackendValue(t *testing.T) {
	raw, err := bpf.NewMemoryMaps(bpf.DefaultConfig, nil)
	if err != nil {
		t.Fatal(err)
	}
	flaky := &partialBackendsUpdate{Map: raw.Backends}
	maps := *raw
	maps.Backends = flaky
	o := review3Ops(t, &maps)
	ctx := context.Background()

	const x, y = "10.8.0.1:8080/TCP", "10.8.0.2:8080/TCP"
	a := review3Frontend("10.96.8.1:80/TCP", x)
	a.Backends[0].State, a.Backends[0].Weight = lb.BackendTerminating, 0
	if err := o.Update(ctx, nil, 0, a); err != nil {
		t.Fatal(err)
	}
	b := review3Frontend("10.96.8.2:80/TCP", x, y)
	flaky.armed = true
	if err := o.Update(ctx, nil, 0, b); err == nil {
		t.Fatal("the update should report the failed batch update")
	}
	if flaky.fired == 0 {
		t.Fatal("the injected failure did not fire")
	}
	// B goes away before its retry.
	if err := o.Delete(ctx, nil, 0, b); err != nil {
		t.Fatal(err)
	}

	_, ids := o.ids()
	got, ok, err := raw.Backends.Lookup(ids[review3Addr(x)])
	if err != nil || !ok {
		t.Fatalf("backend %s not in lb_backends: %v", x, err)
	}
	if want := bpf.NewBackend(a.Backends[0], 0); got != want {
		t.Fatalf("backend %s: lb_backends holds state %d, want %d (what the only frontend using it, A, sees)", x, got.State, want.State)
	}
}
