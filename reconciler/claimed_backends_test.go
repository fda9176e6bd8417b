package reconciler

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// randomFaults fails a map operation one time in n while armed.
type randomFaults struct {
	rng   *rand.Rand
	n     int
	armed bool
}

func (f *randomFaults) Fail(mapName, op string) error {
	if f.armed && f.rng.IntN(f.n) == 0 {
		return fmt.Errorf("%s: %s: injected failure", mapName, op)
	}
	return nil
}

// checkBackendRefs fails unless every backend state's reference count is
// the number of frontend states (claimed or restored) that hold it, and
// every frontend that its last update wrote holds exactly the backends
// of its address list (selected and hidden, each address once).
func checkBackendRefs(t *testing.T, step string, o *ops, written map[lb.L3n4Addr]*lb.Frontend) {
	t.Helper()
	holders := map[uint32]int32{}
	for _, x := range []*addrMap{&o.frontends, &o.restoredFrontends} {
		for _, i := range x.all() {
			for _, b := range o.feStates.at(i).backends() {
				holders[b]++
			}
		}
	}
	for _, x := range []*keyIndex{&o.backends, &o.restoredBackends} {
		for k, i := range x.all() {
			if be := o.beStates.at(i); be.refs != holders[i] {
				t.Fatalf("%s: backend %v counts %d references, %d frontends hold it", step, k.l3n4(), be.refs, holders[i])
			}
			delete(holders, i)
		}
	}
	for i, n := range holders {
		t.Fatalf("%s: %d frontends hold backend state %d, which no index finds", step, n, i)
	}
	for addr, fe := range written {
		i, ok := o.frontends.get(keyOf(addr))
		if !ok {
			t.Fatalf("%s: frontend %s written, without state", step, addr)
		}
		var want, got []string
		for _, b := range kept(fe) {
			want = append(want, b.Address.String())
		}
		for _, b := range o.feStates.at(i).backends() {
			got = append(got, o.beStates.at(b).key.l3n4().String())
		}
		slices.Sort(want)
		slices.Sort(got)
		if want = slices.Compact(want); !slices.Equal(got, want) {
			t.Fatalf("%s: frontend %s holds backends %v, its update kept %v", step, addr, got, want)
		}
	}
}

// randomFrontend returns a frontend at addr whose backends are drawn from
// pool with repeats, some of them also (or only) hidden, up to twice
// heldScan in all.
func randomFrontend(rng *rand.Rand, addr string, pool []lb.L3n4Addr) *lb.Frontend {
	fe := clusterIPFrontend(addr)
	for range rng.IntN(2*heldScan + 4) {
		fe.Backends = append(fe.Backends, lb.BackendRef{Address: pool[rng.IntN(len(pool))], Weight: lb.DefaultBackendWeight})
	}
	var hidden []lb.BackendRef
	for range rng.IntN(4) {
		a := pool[rng.IntN(len(pool))]
		if len(fe.Backends) > 0 && rng.IntN(2) == 0 {
			a = fe.Backends[rng.IntN(len(fe.Backends))].Address // hidden and selected
		}
		hidden = append(hidden, lb.BackendRef{Address: a, Weight: lb.DefaultBackendWeight})
	}
	if len(hidden) > 0 {
		fe.SetExtras(lb.FrontendExtras{Hidden: hidden})
	}
	return fe
}

// dumpBackendMaps is lb_backends, lb_services and lb_rev_nat as text, in
// order.
func dumpBackendMaps(m *bpf.Maps) string {
	var lines []string
	m.Backends.Iterate(func(id uint32, v bpf.Backend) bool {
		lines = append(lines, fmt.Sprintf("backend %d %v", id, v))
		return true
	})
	m.Services.Iterate(func(k bpf.ServiceKey, v bpf.ServiceValue) bool {
		lines = append(lines, fmt.Sprintf("service %v %v", k, v))
		return true
	})
	m.RevNat.Iterate(func(id uint32, v bpf.RevNatValue) bool {
		lines = append(lines, fmt.Sprintf("revnat %d %v", id, v))
		return true
	})
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// Batches of frontends whose backend lists repeat addresses, hide some
// of them (some also selected), hold more than heldScan, mix IPv4 and
// IPv6, on maps that fail one operation in 100 (a claim's batch failing
// after other frontends' claims succeeded), across restarts that restore
// what the maps hold: each backend counts one reference per frontend
// holding it, and a frontend whose update succeeded holds exactly the
// backends it keeps (the claims by arena index, unused's drop, decide as
// the comparison of addresses once did).
func TestClaimedBackendsAreExactlyTheKeptOnesUnderRepeatsHiddenAndFailures(t *testing.T) {
	ctx := context.Background()
	var pool []lb.L3n4Addr
	for i := range 24 {
		pool = append(pool, lb.MustParseL3n4Addr(fmt.Sprintf("10.8.0.%d:8080/TCP", i+1)))
		pool = append(pool, lb.MustParseL3n4Addr(fmt.Sprintf("[fd00::8:%x]:8080/TCP", i+1)))
	}
	statFail, statMany := 0, 0
	// With LBSTATE_CLAIM_TRACE=file, and no faults, the maps after each
	// step go to file, to compare versions of the reconciler.
	path := os.Getenv("LBSTATE_CLAIM_TRACE")
	tracing := path != ""
	var trace strings.Builder
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 11))
		faults := &randomFaults{rng: rand.New(rand.NewPCG(seed, 12)), n: 100}
		if tracing {
			faults.n = 1 << 30 // which operation fails depends on map iteration orders
		}
		bmaps, err := bpf.NewMemoryMaps(bpf.DefaultConfig, faults)
		if err != nil {
			t.Fatal(err)
		}
		s, err := DefaultConfig.settings()
		if err != nil {
			t.Fatal(err)
		}
		start := func() *ops {
			faults.armed = false // restore reads and writes what it must
			defer func() { faults.armed = true }()
			o, err := newOps(bmaps, s, slog.New(slog.DiscardHandler), nil)
			if err != nil {
				t.Fatal(err)
			}
			initialized := rng.IntN(2) == 0 // else unused backends park
			o.tableInitialized = func(statedb.ReadTxn) bool { return initialized }
			return o
		}
		o := start()
		written := map[lb.L3n4Addr]*lb.Frontend{}
		const frontends = 10
		for step := range 300 {
			label := fmt.Sprintf("seed %d step %d", seed, step)
			switch op := rng.IntN(100); {
			case op < 75:
				var batch []reconciler.BatchEntry[*lb.Frontend]
				for _, f := range rng.Perm(frontends)[:1+rng.IntN(4)] {
					vip := fmt.Sprintf("10.96.8.%d:80/TCP", f+1)
					if f%3 == 0 {
						vip = fmt.Sprintf("[fd00::96:%x]:80/TCP", f+1)
					}
					batch = append(batch, reconciler.BatchEntry[*lb.Frontend]{Object: randomFrontend(rng, vip, pool)})
				}
				o.UpdateBatch(ctx, nil, batch)
				for _, e := range batch {
					if e.Result != nil {
						statFail++
						delete(written, e.Object.Address)
						continue
					}
					if len(kept(e.Object)) > heldScan {
						statMany++
					}
					written[e.Object.Address] = e.Object
				}
			case op < 90:
				if len(written) == 0 {
					break
				}
				addrs := slices.SortedFunc(maps.Keys(written), lb.L3n4Addr.Compare)
				fe := written[addrs[rng.IntN(len(addrs))]]
				if o.Delete(ctx, nil, 0, fe) != nil {
					label += " (delete failed)"
				}
				delete(written, fe.Address)
			default:
				o = start()
				label += " (restarted)"
				clear(written) // restored, not written by this ops
			}
			checkBackendRefs(t, label, o, written)
			checkBackendIndexes(t, label, o)
			if tracing {
				fmt.Fprintf(&trace, "%s\n%s\n", label, dumpBackendMaps(bmaps))
			}
		}
	}
	if statMany == 0 || statFail == 0 && !tracing {
		t.Fatalf("%d updates of more than heldScan backends, %d failed: the test does not test what it says", statMany, statFail)
	}
	if tracing {
		if err := os.WriteFile(path, []byte(trace.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
