package reconciler

import (
	"context"
	"fmt"
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// failingBackendDelete makes lb_backends' Delete of one ID fail, times
// times.
type failingBackendDelete struct {
	bpf.Map[uint32, bpf.Backend]
	id    uint32
	times int
}

func (f *failingBackendDelete) Delete(k uint32) error {
	if k == f.id && f.times > 0 {
		f.times--
		return fmt.Errorf("%s: delete %d: injected failure", f.Name(), k)
	}
	return f.Map.Delete(k)
}

// A parked backend whose delete fails in a prune keeps its entry, so
// that a frontend taking it back names a backend that is there. (A
// prune that read the maps once deleted the entry as unknown, counting
// only the backends in use as known, while the state stayed parked as
// written: the frontend that took it back got slots naming a missing
// backend. Found by TestBackendIndexesHoldEachLiveStateOnceUnderChurnAndFailures.)
func TestParkedBackendWhoseDeleteFailedKeepsItsEntry(t *testing.T) {
	raw, err := bpf.NewMemoryMaps(bpf.DefaultConfig, nil)
	if err != nil {
		t.Fatal(err)
	}
	flaky := &failingBackendDelete{Map: raw.Backends}
	maps := *raw
	maps.Backends = flaky
	ctx := context.Background()
	const vip, x, y = "10.96.8.1:80/TCP", "10.8.0.1:8080/TCP", "10.8.0.2:8080/TCP"
	before := initializedOps(t, &maps)
	if err := before.Update(ctx, nil, 0, clusterIPFrontend(vip, x)); err != nil {
		t.Fatal(err)
	}
	_, ids := before.ids()
	flaky.id, flaky.times = ids[lb.MustParseL3n4Addr(x)], 2

	// After a restart, before the tables are initialized, the frontend
	// moves to y: x parks, its entry written.
	o := initializedOps(t, &maps)
	o.tableInitialized = func(statedb.ReadTxn) bool { return false }
	if err := o.Update(ctx, nil, 0, clusterIPFrontend(vip, y)); err != nil {
		t.Fatal(err)
	}
	declared := func(yield func(*lb.Frontend, statedb.Revision) bool) { yield(clusterIPFrontend(vip, y), 0) }
	// The first prune (from what restore read), then one that reads the
	// maps: x's delete fails in both.
	for range 2 {
		if err := o.Prune(ctx, nil, declared); err == nil {
			t.Fatal("the prune should report the failed delete")
		}
	}
	if flaky.times != 0 {
		t.Fatalf("the injected failures did not fire (%d left)", flaky.times)
	}
	if err := o.Update(ctx, nil, 0, clusterIPFrontend(vip, x)); err != nil { // x taken back
		t.Fatal(err)
	}
	if err := checkSlots(&maps); err != nil {
		t.Fatalf("after the frontend took back the backend whose delete failed:\n%v", err)
	}
}
