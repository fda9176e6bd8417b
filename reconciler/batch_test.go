package reconciler

// Batched map operations that fail part way (the bpf.Map contract: "On
// error, a prefix of the entries may have been applied"), driven through
// ops directly so that each failure hits exactly one step.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// partialBackendsDelete makes lb_backends' BatchDelete, once armed,
// delete the first key only and then fail.
type partialBackendsDelete struct {
	bpf.Map[uint32, bpf.Backend]
	armed bool
	fired int
}

func (f *partialBackendsDelete) BatchDelete(ks []uint32) error {
	if f.armed && len(ks) > 1 {
		f.armed = false
		f.fired++
		if err := f.Map.Delete(ks[0]); err != nil {
			return err
		}
		return fmt.Errorf("%s: batch delete: injected failure after 1 of %d keys", f.Name(), len(ks))
	}
	return f.Map.BatchDelete(ks)
}

// partialBackendsUpdate makes lb_backends' BatchUpdate, once armed, write
// the first entry only and then fail.
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

// initializedOps returns ops over maps with the tables initialized, so
// that unused backends are deleted rather than parked.
func initializedOps(t testing.TB, maps *bpf.Maps) *ops {
	t.Helper()
	s, err := DefaultConfig.settings()
	if err != nil {
		t.Fatal(err)
	}
	o, err := newOps(maps, s, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	o.tableInitialized = func(statedb.ReadTxn) bool { return true }
	return o
}

// clusterIPFrontend returns a ClusterIP frontend with the given backends.
func clusterIPFrontend(vip string, backends ...string) *lb.Frontend {
	name := lb.NewServiceName("test", "svc")
	fe := &lb.Frontend{
		FrontendParams: lb.FrontendParams{Address: lb.MustParseL3n4Addr(vip), Type: lb.SVCTypeClusterIP},
		Service:        name,
		Policy:         &lb.ServiceParams{Name: name, Source: lb.SourceK8s, Algorithm: lb.AlgorithmRandom},
	}
	for _, b := range backends {
		fe.Backends = append(fe.Backends, lb.BackendRef{Address: lb.MustParseL3n4Addr(b), Weight: lb.DefaultBackendWeight})
	}
	return fe
}

// checkSlots reports a slot naming a backend ID that is not in
// lb_backends, or a master counting a slot that does not exist.
func checkSlots(m *bpf.Maps) error {
	backends := map[uint32]bool{}
	m.Backends.Iterate(func(id uint32, _ bpf.Backend) bool { backends[id] = true; return true })
	var errs []error
	m.Services.Iterate(func(k bpf.ServiceKey, v bpf.ServiceValue) bool {
		if k.Slot == 0 {
			for slot := 1; slot <= int(v.Count)+int(v.Standby); slot++ {
				id, ok, _ := bpf.SlotBackend(m.Services, k.L3n4Addr(), v, slot)
				if !ok {
					errs = append(errs, fmt.Errorf("master of %s counts slot %d, which is missing", k.L3n4Addr(), slot))
				} else if !bpf.HasEntry(slot) && !backends[id] { // an entry's is checked as such
					errs = append(errs, fmt.Errorf("slot %d of %s names backend %d, which is not in lb_backends", slot, k.L3n4Addr(), id))
				}
			}
		} else if !backends[v.BackendID] {
			errs = append(errs, fmt.Errorf("slot %d of %s names backend %d, which is not in lb_backends", k.Slot, k.L3n4Addr(), v.BackendID))
		}
		return true
	})
	return errors.Join(errs...)
}

// A backend whose batched delete failed, and that a frontend takes back
// before the next prune, is written again: the delete may have removed it.
// (Backends of a failed delete were once parked as still present, and the
// frontend taking one back named an ID missing from lb_backends for good.)
func TestBackendRewrittenAfterPartialBatchDelete(t *testing.T) {
	raw, err := bpf.NewMemoryMaps(bpf.DefaultConfig, nil)
	if err != nil {
		t.Fatal(err)
	}
	flaky := &partialBackendsDelete{Map: raw.Backends}
	maps := *raw
	maps.Backends = flaky
	o := initializedOps(t, &maps)
	ctx := context.Background()

	const vip = "10.96.7.1:80/TCP"
	if err := o.Update(ctx, nil, 0, clusterIPFrontend(vip, "10.7.0.1:8080/TCP", "10.7.0.2:8080/TCP")); err != nil {
		t.Fatal(err)
	}
	// The frontend moves to another backend: both old ones are doomed and
	// their batched delete fails after the first key.
	flaky.armed = true
	if err := o.Update(ctx, nil, 0, clusterIPFrontend(vip, "10.7.0.3:8080/TCP")); err == nil {
		t.Fatal("the update should report the failed backend delete")
	}
	if flaky.fired == 0 {
		t.Fatal("the injected failure did not fire")
	}
	// Before any prune, the frontend goes back to its old backends (or
	// statedb retries a newer version of it).
	if err := o.Update(ctx, nil, 0, clusterIPFrontend(vip, "10.7.0.1:8080/TCP", "10.7.0.2:8080/TCP")); err != nil {
		t.Fatal(err)
	}
	if err := checkSlots(&maps); err != nil {
		t.Fatalf("after the frontend took its backends back:\n%v", err)
	}
}

// A shared backend whose batched update failed part way gets the value
// the remaining frontends see once the frontend that changed it lets go.
// (Frontend A sees X terminating; B's update made X active, the batch
// wrote X and failed. B then went away, and the release skipped rewriting
// X because the failed batch had left it marked unwritten: X stayed
// active until A itself changed.)
func TestSharedBackendValueRestoredAfterPartialBatchUpdate(t *testing.T) {
	raw, err := bpf.NewMemoryMaps(bpf.DefaultConfig, nil)
	if err != nil {
		t.Fatal(err)
	}
	flaky := &partialBackendsUpdate{Map: raw.Backends}
	maps := *raw
	maps.Backends = flaky
	o := initializedOps(t, &maps)
	ctx := context.Background()

	const x, y = "10.8.0.1:8080/TCP", "10.8.0.2:8080/TCP"
	a := clusterIPFrontend("10.96.8.1:80/TCP", x)
	a.Backends[0].State, a.Backends[0].Weight = lb.BackendTerminating, 0
	if err := o.Update(ctx, nil, 0, a); err != nil {
		t.Fatal(err)
	}
	b := clusterIPFrontend("10.96.8.2:80/TCP", x, y)
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
	got, ok, err := raw.Backends.Lookup(ids[lb.MustParseL3n4Addr(x)])
	if err != nil || !ok {
		t.Fatalf("backend %s not in lb_backends: %v", x, err)
	}
	want := bpf.NewBackend(a.Backends[0], 0)
	want.ID = ids[lb.MustParseL3n4Addr(x)]
	if got != want {
		t.Fatalf("backend %s: lb_backends holds state %d, want %d (what the only frontend using it, A, sees)", x, got.State, want.State)
	}
}
