package reconciler_test

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
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
