package reconciler_test

import (
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// readCounted counts the reads of every entry of a map (Iterate). Count
// is passed on: the kernel's lb_backends counts what it knows without
// reading.
type readCounted[K comparable, V any] struct {
	bpf.Map[K, V]
	reads *atomic.Int32
}

func (m readCounted[K, V]) Iterate(fn func(K, V) bool) error {
	m.reads.Add(1)
	return m.Map.Iterate(fn)
}

func (m readCounted[K, V]) Count() (int, error) { return bpf.Count(m.Map) }

// The first prune after a restart deletes what restore found that nobody
// accounts for without reading lb_services or lb_backends again, and
// deletes all of it: slots without a master entry, the rev-NAT entry and
// the Maglev table of IDs no frontend has, and the backend only those
// slots named; the frontend declared again keeps its entries and ID. (At
// 100,000 services x 10 backends, reading the maps again cost 2 s of
// CPU before the restarted agent was pruned.)
func TestFirstPruneAfterRestartDeletesLeftoversWithoutReadingTheMapsAgain(t *testing.T) {
	raw := memoryMaps(t)
	vip, y := addr("10.96.17.1:80/TCP"), addr("10.17.0.2:8080/TCP")
	a1 := newAgent(t, raw, nil)
	a1.start(t)
	a1.write(t, func(txn statedb.WriteTxn) error {
		return upsert(a1.w, txn, "web", vip.String(), lb.AlgorithmRandom, false, be(y.String()))
	})
	a1.waitDone(t, 10*time.Second)
	ids := a1.frontendIDs()
	a1.stop(t)
	kept := dumpText(t, raw)

	// Left by a crash or someone else: slots without a master naming a
	// backend of their own, a rev-NAT entry of a frontend no source
	// declares, a Maglev table of an ID nothing else has.
	x := addr("10.17.0.1:8080/TCP")
	mustDo(t, raw.Backends.Update(905, bpf.NewBackend(lb.BackendRef{Address: x}, 0)))
	for slot := uint16(1); slot <= 3; slot++ {
		mustDo(t, raw.Services.Update(bpf.NewServiceKey(addr("10.96.17.2:80/TCP"), slot), bpf.ServiceValue{BackendID: 905, RevNatID: 903}))
	}
	mustDo(t, raw.RevNat.Update(907, bpf.NewRevNatValue(addr("10.96.17.3:80/TCP"))))
	mustDo(t, raw.Maglev.Update(909, slices.Repeat([]uint32{905}, raw.Maglev.TableSize())))

	var servicesReads, backendsReads atomic.Int32
	maps := *raw
	maps.Services = readCounted[bpf.ServiceKey, bpf.ServiceValue]{raw.Services, &servicesReads}
	maps.Backends = readCounted[uint32, bpf.Backend]{raw.Backends, &backendsReads}
	a2, synced := startUnsynced(t, &maps)
	a2.write(t, func(txn statedb.WriteTxn) error {
		return upsert(a2.w, txn, "web", vip.String(), lb.AlgorithmRandom, false, be(y.String()))
	})
	a2.waitDone(t, 10*time.Second) // after restore, which the update waits for
	restoreReads := []int32{servicesReads.Load(), backendsReads.Load()}
	synced()
	a2.waitPruned(t, 10*time.Second)

	if got := dumpText(t, raw); got != kept {
		t.Errorf("the first prune left the maps with:\n%s\nwant what the first agent wrote:\n%s", got, kept)
	}
	if got := a2.frontendIDs(); got[vip] != ids[vip] {
		t.Errorf("frontend %s: ID %d after the restart, %d before", vip, got[vip], ids[vip])
	}
	if got := []int32{servicesReads.Load(), backendsReads.Load()}; !slices.Equal(got, restoreReads) {
		t.Errorf("lb_services and lb_backends were read %v times by the restarted agent, %v of them by restore: the first prune read them again",
			got, restoreReads)
	}
	if s := a2.scrape(t); !strings.Contains(s, "lbstate_reconciler_prune_errors_total 0") {
		t.Errorf("the prune failed:\n%s", s)
	}
}
