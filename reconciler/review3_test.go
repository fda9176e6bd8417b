package reconciler

// Tests from a third review (batched reconciliation). Each test's comment
// describes the bug it demonstrates.

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

// partialBackendsDelete makes lb_backends' BatchDelete, while armed,
// delete the first key only and then fail, as the Map contract allows
// ("On error, a prefix of the entries may have been applied") and as a
// kernel batch does when it fails part way.
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

func review3Ops(t *testing.T, maps *bpf.Maps) *ops {
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

func review3Addr(s string) lb.L3n4Addr { return lb.MustParseL3n4Addr(s) }

func review3Frontend(vip string, backends ...string) *lb.Frontend {
	fe := &lb.Frontend{
		FrontendParams: lb.FrontendParams{Address: review3Addr(vip), Type: lb.SVCTypeClusterIP},
		Service:        lb.NewServiceName("review3", "svc"),
		Policy:         &lb.ServiceParams{Name: lb.NewServiceName("review3", "svc"), Source: lb.SourceK8s, Algorithm: lb.AlgorithmRandom},
	}
	for _, b := range backends {
		fe.Backends = append(fe.Backends, lb.BackendRef{Address: review3Addr(b), Weight: lb.DefaultBackendWeight})
	}
	return fe
}

// review3Check reports a slot naming a backend ID that is not in
// lb_backends, or a master counting a slot that does not exist.
func review3Check(m *bpf.Maps) error {
	backends := map[uint32]bool{}
	m.Backends.Iterate(func(id uint32, _ bpf.Backend) bool { backends[id] = true; return true })
	var errs []error
	m.Services.Iterate(func(k bpf.ServiceKey, v bpf.ServiceValue) bool {
		if k.Slot == 0 {
			for slot := 1; slot <= int(v.Count)+int(v.Standby); slot++ {
				sk := k
				sk.Slot = uint16(slot)
				if _, ok, _ := m.Services.Lookup(sk); !ok {
					errs = append(errs, fmt.Errorf("master of %s counts slot %d, which is missing", k.L3n4Addr(), slot))
				}
			}
		} else if !backends[v.BackendID] {
			errs = append(errs, fmt.Errorf("slot %d of %s names backend %d, which is not in lb_backends", k.Slot, k.L3n4Addr(), v.BackendID))
		}
		return true
	})
	return errors.Join(errs...)
}

// deleteBackends (reconciler/ops.go) deletes a batch's unused backends with
// one BatchDelete and, if it fails, parks every one of them in
// restoredBackends with its entry assumed present (written=true, value
// kept). But a failed batch may have deleted a prefix of the keys. A
// frontend that selects such a backend again before the next prune adopts
// the parked state, writeBackends sees written && value unchanged and
// skips the write: the frontend's slot names a backend ID that is not in
// lb_backends, for good (prune keeps it: a frontend uses it).
func TestReview3PartialBackendBatchDeleteThenReuse(t *testing.T) {
	raw, err := bpf.NewMemoryMaps(bpf.DefaultConfig, nil)
	if err != nil {
		t.Fatal(err)
	}
	flaky := &partialBackendsDelete{Map: raw.Backends}
	maps := *raw
	maps.Backends = flaky
	o := review3Ops(t, &maps)
	ctx := context.Background()

	const vip = "10.96.7.1:80/TCP"
	if err := o.Update(ctx, nil, 0, review3Frontend(vip, "10.7.0.1:8080/TCP", "10.7.0.2:8080/TCP")); err != nil {
		t.Fatal(err)
	}
	// The frontend moves to another backend: both old ones are doomed and
	// their batched delete fails after the first key.
	flaky.armed = true
	if err := o.Update(ctx, nil, 0, review3Frontend(vip, "10.7.0.3:8080/TCP")); err == nil {
		t.Fatal("the update should report the failed backend delete")
	}
	if flaky.fired == 0 {
		t.Fatal("the injected failure did not fire")
	}
	// Before any prune, the frontend goes back to its old backends (or
	// statedb retries a newer version of it).
	if err := o.Update(ctx, nil, 0, review3Frontend(vip, "10.7.0.1:8080/TCP", "10.7.0.2:8080/TCP")); err != nil {
		t.Fatal(err)
	}
	if err := review3Check(&maps); err != nil {
		t.Fatalf("after the frontend took its backends back:\n%v", err)
	}
}
