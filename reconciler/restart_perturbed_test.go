package reconciler_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"regexp"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reconciler"
)

// A restart over pinned maps that a crash or an older agent left uneven
// (an address under two backend IDs in either read order, slots naming
// either, a slot or a master missing, slots of an unknown frontend, an
// unknown backend), with the sources declaring some services as before,
// some changed and some not at all, settles: every frontend whole, the
// maps holding only what the table says, and the room counts equal to
// what each map holds. Restore reads lb_backends beside the other maps,
// and the first prune keeps restore's counts when nothing is left over:
// seeded cases cover both, with the prune before or after the updates,
// and half of them with writes failing until the first prune (a recount
// there once left the counts short of the entries the retries wrote).
func TestRestartOverUnevenMapsSettlesWithTheCountsOfWhatTheMapsHold(t *testing.T) {
	for seed := range 40 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { restartOverUnevenMaps(t, uint64(seed)) })
	}
}

type unevenService struct {
	vip string
	alg lb.Algorithm
	bes []lb.BackendParams
}

func restartOverUnevenMaps(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 7))
	faults := bpftest.NewFaults(0, seed)
	raw, err := bpf.NewMemoryMaps(smallMapsConfig(), faults)
	mustDo(t, err)
	pool := make([]lb.BackendParams, 16)
	for i := range pool {
		pool[i] = lb.BackendParams{Address: lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{10, 70, 0, byte(i + 1)}), 8080, lb.ScopeExternal), Weight: 100}
	}
	service := func(i int) unevenService {
		s := unevenService{vip: fmt.Sprintf("10.96.70.%d:80/TCP", i+1), alg: lb.AlgorithmRandom}
		if r.IntN(3) == 0 {
			s.alg = lb.AlgorithmMaglev
		}
		seen := map[int]bool{}
		for range 1 + r.IntN(4) {
			if j := r.IntN(len(pool)); !seen[j] {
				seen[j] = true
				s.bes = append(s.bes, pool[j])
			}
		}
		return s
	}
	svcs := make([]unevenService, 12)
	for i := range svcs {
		svcs[i] = service(i)
	}
	declareAll := func(a *agent, change func(i int, s unevenService) (unevenService, bool)) {
		a.write(t, func(txn statedb.WriteTxn) error {
			for i, s := range svcs {
				s, ok := change(i, s)
				if !ok {
					continue
				}
				if err := upsert(a.w, txn, fmt.Sprint("s", i), s.vip, s.alg, false, s.bes...); err != nil {
					return err
				}
			}
			return nil
		})
	}
	a1 := newAgent(t, raw, nil)
	a1.start(t)
	declareAll(a1, func(_ int, s unevenService) (unevenService, bool) { return s, true })
	a1.waitDone(t, 10*time.Second)
	a1.stop(t)

	unevenMaps(t, r, raw)

	// Half the runs fail a fifth of the writes until the first prune.
	faulty := seed%2 == 1
	defer reconciler.SetRetryMinBackoff(10 * time.Millisecond)()
	defer reconciler.SetPruneRetry(10*time.Millisecond, 100*time.Millisecond)()
	a2, synced := startUnsynced(t, raw)
	if faulty {
		faults.SetProbability(0.2)
	}
	declareAll(a2, func(i int, s unevenService) (unevenService, bool) {
		switch r.IntN(5) {
		case 0:
			return s, false // gone while the agent was down
		case 1:
			return service(i), true
		}
		return s, true
	})
	if r.IntN(2) == 0 && !faulty {
		a2.waitDone(t, 10*time.Second) // else the prune may come first
	}
	synced()
	// A prune, maybe failed (retried at once): the count passes 1.
	pruned := regexp.MustCompile(`lbstate_reconciler_prune_duration_seconds_count [1-9]`)
	waitFor(t, 10*time.Second, "a prune", func() bool { return pruned.MatchString(a2.scrape(t)) })
	faults.SetProbability(0)
	// Once pruned (a failed prune's retry too), every backend entry is
	// one a slot names.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		unnamed := unnamedBackends(t, raw)
		if unnamed == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("left in lb_backends, named by no slot: %s\n%s", unnamed, dumpText(t, raw))
		}
	}
	a2.waitSettled(t, raw, 10*time.Second)
	checkAllCounted(t, a2, raw)
}

// unevenMaps changes what an agent left in raw as a crash, an older
// agent or a failed delete would, and logs what it did.
func unevenMaps(t *testing.T, r *rand.Rand, raw *bpf.Maps) {
	t.Helper()
	var ids []uint32
	backends := map[uint32]bpf.Backend{}
	mustDo(t, raw.Backends.Iterate(func(id uint32, v bpf.Backend) bool {
		ids, backends[id] = append(ids, id), v
		return true
	}))
	type entry struct {
		k bpf.ServiceKey
		v bpf.ServiceValue
	}
	var entries []entry
	mustDo(t, raw.Services.Iterate(func(k bpf.ServiceKey, v bpf.ServiceValue) bool {
		entries = append(entries, entry{k, v})
		return true
	}))
	newID := uint32(40000)
	var did []string
	for range r.IntN(5) {
		switch r.IntN(6) {
		case 0, 1: // the address under a second ID, which slots may name
			id := ids[r.IntN(len(ids))]
			v := backends[id]
			v.ID = 0
			mustDo(t, raw.Backends.Update(newID, v))
			did = append(did, fmt.Sprintf("backend %d also as %d", id, newID))
			if r.IntN(2) == 0 {
				for _, e := range entries {
					if e.k.Slot > 0 && e.v.BackendID == id && r.IntN(2) == 0 {
						e.v.BackendID = newID
						mustDo(t, raw.Services.Update(e.k, e.v))
						did = append(did, fmt.Sprintf("%v slot %d names %d", e.k.L3n4Addr(), e.k.Slot, newID))
					}
					if e.k.Slot > 0 {
						continue
					}
					renamed := false // a master's inline slots
					for s, inline := range e.v.Inline() {
						if inline == id && r.IntN(2) == 0 {
							e.v.Backends[s], renamed = newID, true
							did = append(did, fmt.Sprintf("%v slot %d names %d", e.k.L3n4Addr(), s+1, newID))
						}
					}
					if renamed {
						mustDo(t, raw.Services.Update(e.k, e.v))
					}
				}
			}
			newID += 3
		case 2: // a slot missing below the last
			if e := entries[r.IntN(len(entries))]; e.k.Slot > 1 {
				mustDo(t, raw.Services.Delete(e.k))
				did = append(did, fmt.Sprintf("%v slot %d missing", e.k.L3n4Addr(), e.k.Slot))
			}
		case 3: // slots without a master
			e := entries[r.IntN(len(entries))]
			mustDo(t, raw.Services.Delete(bpf.NewServiceKey(e.k.L3n4Addr(), 0)))
			did = append(did, fmt.Sprintf("%v master missing", e.k.L3n4Addr()))
		case 4: // slots of a frontend nobody knows
			vip := addr(fmt.Sprintf("10.96.71.%d:80/TCP", r.IntN(50)+1))
			mustDo(t, raw.Services.Update(bpf.NewServiceKey(vip, bpf.InlineSlots+1), bpf.ServiceValue{BackendID: ids[r.IntN(len(ids))], RevNatID: 999}))
			did = append(did, fmt.Sprintf("unknown %v", vip))
		case 5: // a backend nobody knows
			b := addr(fmt.Sprintf("10.72.0.%d:8080/TCP", r.IntN(50)+1))
			mustDo(t, raw.Backends.Update(newID, bpf.NewBackend(lb.BackendRef{Address: b, Weight: 100}, 0)))
			did = append(did, fmt.Sprintf("unknown backend %d", newID))
			newID += 3
		}
	}
	t.Logf("uneven: %v", did)
}

// unnamedBackends returns the lb_backends entries that no slot names.
func unnamedBackends(t *testing.T, raw *bpf.Maps) string {
	named := map[uint32]bool{}
	mustDo(t, raw.Services.Iterate(func(k bpf.ServiceKey, v bpf.ServiceValue) bool {
		named[v.BackendID] = named[v.BackendID] || k.Slot > 0
		if k.Slot == 0 {
			for _, id := range v.Inline() {
				named[id] = true
			}
		}
		return true
	}))
	var out string
	mustDo(t, raw.Backends.Iterate(func(id uint32, v bpf.Backend) bool {
		if !named[id] {
			out += fmt.Sprintf("backend %d %v; ", id, v.L3n4Addr())
		}
		return true
	}))
	return out
}
