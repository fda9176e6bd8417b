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
	a1 := newAgent(t, raw, nil)
	a1.start(t)
	a1.write(t, func(txn statedb.WriteTxn) error {
		return upsert(a1.w, txn, "web", vip.String(), lb.AlgorithmRandom, false, be(bes[0]), be(bes[1]), be(bes[2]))
	})
	a1.waitDone(t, 10*time.Second)
	a1.stop(t)
	mustDo(t, raw.Services.Delete(bpf.NewServiceKey(vip, 0))) // the crash: no master yet

	a2, synced := startUnsynced(t, raw)
	a2.write(t, func(txn statedb.WriteTxn) error {
		return upsert(a2.w, txn, "web", vip.String(), lb.AlgorithmRandom, false, be(bes[0]), be(bes[1]), be(bes[2]))
	})
	a2.waitDone(t, 10*time.Second)
	synced()
	a2.waitPruned(t, 10*time.Second)
	real, err := bpf.Count(raw.Services)
	if err != nil {
		t.Fatal(err)
	}
	if got := entriesMetric(t, a2, raw.Services.Name()); got != real {
		t.Errorf("lb_services: counted %d entries after the first prune, the map holds %d", got, real)
	}
}

// A key restore cannot give back (padding set) makes the first prune read
// lb_services again: what it deletes leaves the count.
func TestRoomCountAfterAPruneOfUnknownServiceKeys(t *testing.T) {
	raw := memoryMaps(t)
	vip := addr("10.96.41.1:80/TCP")
	a1 := newAgent(t, raw, nil)
	a1.start(t)
	a1.write(t, func(txn statedb.WriteTxn) error {
		return upsert(a1.w, txn, "web", vip.String(), lb.AlgorithmRandom, false, be("10.41.0.1:8080/TCP"))
	})
	a1.waitDone(t, 10*time.Second)
	a1.stop(t)
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
	real, err := bpf.Count(raw.Services)
	if err != nil {
		t.Fatal(err)
	}
	if got := entriesMetric(t, a2, raw.Services.Name()); got != real {
		t.Errorf("lb_services: counted %d entries after the first prune, the map holds %d", got, real)
	}
}

func entriesMetric(t *testing.T, a *agent, name string) int {
	m := regexp.MustCompile(`lbstate_map_entries\{map="` + name + `"\} (-?\d+)`).FindStringSubmatch(a.scrape(t))
	if m == nil {
		t.Fatalf("no %s entries metric", name)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// lb_services recreated: a Maglev frontend is known by its rev-NAT entry
// and its Maglev table only (leftovers). It is declared again (claims
// them), then moves to another algorithm (its table deleted) before the
// first prune: the table is not counted out twice.
func TestMaglevCountAfterALeftoverTableGoesBeforeThePrune(t *testing.T) {
	raw := memoryMaps(t)
	vip := addr("10.96.42.1:80/TCP")
	a1 := newAgent(t, raw, nil)
	a1.start(t)
	a1.write(t, func(txn statedb.WriteTxn) error {
		return upsert(a1.w, txn, "web", vip.String(), lb.AlgorithmMaglev, false, be("10.42.0.1:8080/TCP"))
	})
	a1.waitDone(t, 10*time.Second)
	a1.stop(t)
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
	real := 0
	mustDo(t, raw.Maglev.Iterate(func(uint32, []uint32) bool { real++; return true }))
	if got := entriesMetric(t, a2, raw.Maglev.Name()); got != real {
		t.Errorf("%s: counted %d entries after the first prune, the map holds %d", raw.Maglev.Name(), got, real)
	}
}
