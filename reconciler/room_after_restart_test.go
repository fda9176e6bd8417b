package reconciler_test

import (
	"fmt"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reconciler"
)

// The room counts are what the maps hold after the first prune of a
// restart, whatever restore left to it (they are upper bounds that admit
// frontends: an under-count admits too many, an over-count refuses).

// A crash between a new frontend's slots and its master: the restart
// finds slots without a master (leftovers); the source declares the
// frontend again, which writes them again.
func TestRoomCountAfterLeftoverSlotsAreWrittenAgain(t *testing.T) {
	raw := memoryMaps(t)
	vip := addr("10.96.40.1:80/TCP")
	bes := []string{"10.40.0.1:8080/TCP", "10.40.0.2:8080/TCP", "10.40.0.3:8080/TCP"}
	loadAndStop(t, raw, vip, lb.AlgorithmRandom, be(bes[0]), be(bes[1]), be(bes[2]))
	mustDo(t, raw.Services.Delete(bpf.NewServiceKey(vip, 0))) // the crash: no master yet

	a2, synced := startUnsynced(t, raw)
	a2.write(t, func(txn statedb.WriteTxn) error {
		return upsert(a2.w, txn, "web", vip.String(), lb.AlgorithmRandom, false, be(bes[0]), be(bes[1]), be(bes[2]))
	})
	a2.waitDone(t, 10*time.Second)
	synced()
	a2.waitPruned(t, 10*time.Second)
	n, err := bpf.Count(raw.Services)
	mustDo(t, err)
	checkCounted(t, a2, raw.Services.Name(), n)
}

// A key restore cannot give back (padding set) makes the first prune read
// lb_services again: what it deletes leaves the count.
func TestRoomCountAfterAPruneOfUnknownServiceKeys(t *testing.T) {
	raw := memoryMaps(t)
	vip := addr("10.96.41.1:80/TCP")
	loadAndStop(t, raw, vip, lb.AlgorithmRandom, be("10.41.0.1:8080/TCP"))
	odd := addr("10.96.41.2:80/TCP")
	for slot := uint16(1); slot <= 3; slot++ {
		k := bpf.NewServiceKey(odd, slot)
		if slot == 1 {
			k.Pad[0] = 1
		}
		mustDo(t, raw.Services.Update(k, bpf.ServiceValue{BackendID: 1, RevNatID: 77}))
	}
	a2, synced := startUnsynced(t, raw)
	a2.write(t, func(txn statedb.WriteTxn) error {
		return upsert(a2.w, txn, "web", vip.String(), lb.AlgorithmRandom, false, be("10.41.0.1:8080/TCP"))
	})
	a2.waitDone(t, 10*time.Second)
	synced()
	a2.waitPruned(t, 10*time.Second)
	n, err := bpf.Count(raw.Services)
	mustDo(t, err)
	checkCounted(t, a2, raw.Services.Name(), n)
}

// A restart whose restore finds the maps holding just what its states
// account for (nothing left over, no slot missing) keeps restore's counts:
// the first prune does not count the maps again (at 100,000 x 10 it once
// read lb_services a second time, 0.35 s before the agent was pruned),
// and the counts are what every map holds.
func TestFirstPruneAfterARestartWithNothingLeftOverKeepsRestoresCounts(t *testing.T) {
	onBothMapKinds(t, func(t *testing.T, maps *bpf.Maps, reopen func() *bpf.Maps) {
		const n = 60
		a1 := newAgent(t, maps, nil)
		a1.start(t)
		declareMixed(t, a1, n)
		a1.waitDone(t, 30*time.Second)
		a1.stop(t)
		if maps.Kind == "kernel" {
			maps.Close()
		}
		maps2 := reopen()
		var recounts atomic.Int32
		defer reconciler.OnRecount(func() { recounts.Add(1) })()

		a2, synced := startUnsynced(t, maps2)
		declareMixed(t, a2, n)
		synced()
		a2.waitDone(t, 30*time.Second)
		a2.waitPruned(t, 30*time.Second)
		if got := recounts.Load(); got != 0 {
			t.Errorf("the maps were counted %d times by the first prune after a restart that found nothing left over", got)
		}
		checkAllCounted(t, a2, maps2)
	})
}

// A slot missing below a frontend's last one (a crash in its write) is
// no leftover, but restore's count is one short of what the frontend's
// state may hold: its update writes the slot, and the first prune counts
// the maps again.
func TestRoomCountAfterAMissingSlotIsWrittenAgain(t *testing.T) {
	raw := memoryMaps(t)
	vip := addr("10.96.43.1:80/TCP")
	// Past the inline slots, so that the slots have entries of their own.
	var bes []lb.BackendParams
	for i := range bpf.InlineSlots + 3 {
		bes = append(bes, be(fmt.Sprintf("10.43.0.%d:8080/TCP", i+1)))
	}
	missing := uint16(bpf.InlineSlots + 2)
	loadAndStop(t, raw, vip, lb.AlgorithmRandom, bes...)
	mustDo(t, raw.Services.Delete(bpf.NewServiceKey(vip, missing)))
	var recounts atomic.Int32
	defer reconciler.OnRecount(func() { recounts.Add(1) })()

	a2, synced := startUnsynced(t, raw)
	a2.write(t, func(txn statedb.WriteTxn) error {
		return upsert(a2.w, txn, "web", vip.String(), lb.AlgorithmRandom, false, bes...)
	})
	a2.waitDone(t, 10*time.Second)
	synced()
	a2.waitPruned(t, 10*time.Second)
	if _, ok, err := raw.Services.Lookup(bpf.NewServiceKey(vip, missing)); !ok || err != nil {
		t.Fatalf("the missing slot was not written again (%v)", err)
	}
	if recounts.Load() == 0 {
		t.Errorf("the first prune trusted restore's count of a map that missed a slot")
	}
	checkAllCounted(t, a2, raw)
}

// checkAllCounted checks the agent's count of every map it fills.
func checkAllCounted(t *testing.T, a *agent, maps *bpf.Maps) {
	t.Helper()
	count := func(n int, err error) int {
		t.Helper()
		mustDo(t, err)
		return n
	}
	maglev := 0
	mustDo(t, maps.Maglev.Iterate(func(uint32, []uint32) bool { maglev++; return true }))
	checkCounted(t, a, maps.Services.Name(), count(bpf.Count(maps.Services)))
	checkCounted(t, a, maps.Backends.Name(), count(bpf.Count(maps.Backends)))
	checkCounted(t, a, maps.RevNat.Name(), count(bpf.Count(maps.RevNat)))
	checkCounted(t, a, maps.SourceRanges.Name(), count(bpf.Count(maps.SourceRanges)))
	checkCounted(t, a, maps.Maglev.Name(), maglev)
}

// loadAndStop has an agent write one service to maps and stop.
func loadAndStop(t *testing.T, raw *bpf.Maps, vip lb.L3n4Addr, alg lb.Algorithm, backends ...lb.BackendParams) {
	a := newAgent(t, raw, nil)
	a.start(t)
	a.write(t, func(txn statedb.WriteTxn) error {
		return upsert(a.w, txn, "web", vip.String(), alg, false, backends...)
	})
	a.waitDone(t, 10*time.Second)
	a.stop(t)
}

// checkCounted checks that an agent's count of a map's entries is held,
// the number the map holds.
func checkCounted(t *testing.T, a *agent, name string, held int) {
	t.Helper()
	m := regexp.MustCompile(`lbstate_map_entries\{map="` + name + `"\} (-?\d+)`).FindStringSubmatch(a.scrape(t))
	if m == nil {
		t.Fatalf("no %s entries metric", name)
	}
	if n, _ := strconv.Atoi(m[1]); n != held {
		t.Errorf("%s: counted %d entries after the first prune, the map holds %d", name, n, held)
	}
}

// lb_services recreated: a Maglev frontend is known by its rev-NAT entry
// and its Maglev table only (leftovers). It is declared again (claims
// them), then moves to another algorithm (its table deleted) before the
// first prune: the table is not counted out twice.
func TestMaglevCountAfterALeftoverTableGoesBeforeThePrune(t *testing.T) {
	raw := memoryMaps(t)
	vip := addr("10.96.42.1:80/TCP")
	loadAndStop(t, raw, vip, lb.AlgorithmMaglev, be("10.42.0.1:8080/TCP"))
	var keys []bpf.ServiceKey
	mustDo(t, raw.Services.Iterate(func(k bpf.ServiceKey, _ bpf.ServiceValue) bool { keys = append(keys, k); return true }))
	mustDo(t, raw.Services.BatchDelete(keys)) // lb_services recreated

	a2, synced := startUnsynced(t, raw)
	a2.write(t, func(txn statedb.WriteTxn) error {
		return upsert(a2.w, txn, "web", vip.String(), lb.AlgorithmMaglev, false, be("10.42.0.1:8080/TCP"))
	})
	a2.waitDone(t, 10*time.Second)
	a2.write(t, func(txn statedb.WriteTxn) error {
		return upsert(a2.w, txn, "web", vip.String(), lb.AlgorithmRandom, false, be("10.42.0.1:8080/TCP"))
	})
	a2.waitDone(t, 10*time.Second)
	synced()
	a2.waitPruned(t, 10*time.Second)
	n := 0
	mustDo(t, raw.Maglev.Iterate(func(uint32, []uint32) bool { n++; return true }))
	checkCounted(t, a2, raw.Maglev.Name(), n)
}
