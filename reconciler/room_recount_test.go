package reconciler_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reconciler"
)

// A recount between a failed write and its retry leaves the counts what
// the maps hold once the retry has written: the states still say the
// entries may exist, so the retry does not count them again; the recount
// counts them. (A prune's recount once counted an empty lb_backends
// there, and the retry's two backends were never counted: the counts,
// which admit frontends, stayed two short of the map for good.)
func TestRoomCountAfterARecountBetweenAFailedWriteAndItsRetry(t *testing.T) {
	defer reconciler.SetRetryMinBackoff(20 * time.Millisecond)()
	raw := memoryMaps(t)
	maps := *raw
	failing := &failingBackendWrites{Map: raw.Backends}
	failing.armed.Store(true)
	maps.Backends = failing
	a, synced := startUnsynced(t, &maps)
	a.write(t, func(txn statedb.WriteTxn) error {
		return upsert(a.w, txn, "web", "10.96.44.1:80/TCP", lb.AlgorithmRandom, false, be("10.44.0.1:8080/TCP"), be("10.44.0.2:8080/TCP"))
	})
	waitFor(t, 10*time.Second, "a failed write", func() bool { return failing.failed.Load() > 0 })
	synced()
	a.waitPruned(t, 10*time.Second)
	failing.armed.Store(false)
	a.waitDone(t, 10*time.Second)
	checkAllCounted(t, a, raw)
}

// failingBackendWrites fails every write of lb_backends while armed.
type failingBackendWrites struct {
	bpf.Map[uint32, bpf.Backend]
	armed  atomic.Bool
	failed atomic.Int32
}

func (m *failingBackendWrites) Update(k uint32, v bpf.Backend) error {
	return m.BatchUpdate([]uint32{k}, []bpf.Backend{v})
}

func (m *failingBackendWrites) BatchUpdate(ks []uint32, vs []bpf.Backend) error {
	if m.armed.Load() && len(ks) > 0 {
		m.failed.Add(1)
		return errors.New("injected lb_backends write failure")
	}
	return m.Map.BatchUpdate(ks, vs)
}
