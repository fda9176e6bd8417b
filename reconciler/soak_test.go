package reconciler_test

import (
	"fmt"
	gomaps "maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reconciler"
	"github.com/lbstate/lbstate/tables"
)

// soakModel is what the soak test has declared: each service's backends
// (by index into the pool), nil for a service it has not declared.
type soakModel map[int][]int

const (
	soakServices = 16
	soakPool     = 24 // backends, shared between services
)

func soakBackend(b int) lb.L3n4Addr {
	return lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{10, 12, 0, byte(b)}), 8080, lb.ScopeExternal)
}

func soakVIP(i int) string { return fmt.Sprintf("10.96.12.%d:80/TCP", i) }

func soakName(i int) lb.ServiceName { return lb.NewServiceName("soak", fmt.Sprintf("svc-%d", i)) }

// declare writes service i of the model (odd ones use Maglev).
func (m soakModel) declare(w *tables.Writer, txn statedb.WriteTxn, i int) error {
	alg := lb.AlgorithmRandom
	if i%2 == 1 {
		alg = lb.AlgorithmMaglev
	}
	name := soakName(i)
	if err := w.UpsertService(txn, lb.ServiceParams{Name: name, Source: lb.SourceK8s, Algorithm: alg,
		Frontends: []lb.FrontendParams{{Address: addr(soakVIP(i)), Type: lb.SVCTypeClusterIP}}}); err != nil {
		return err
	}
	bes := make([]lb.BackendParams, len(m[i]))
	for j, b := range m[i] {
		bes[j] = lb.BackendParams{Address: soakBackend(b), Weight: lb.DefaultBackendWeight}
	}
	return w.SetBackends(txn, name, lb.SourceK8s, bes...)
}

// The soak test: a hive on kernel maps too small for what is declared,
// through rounds of random changes (and input the Writer must reject),
// with restarts over the same pinned maps. A checker reads the maps all
// along as a datapath does and never sees a half-written service; after
// every round the maps are the documented outcome (settled: each
// frontend served whole or lacking room, oldest first); across a restart
// the frontends in service stay so, with their IDs. Bounded in rounds;
// each wait for the reconciler has a generous deadline and nothing is
// timed.
func TestSoakFullMapsRestartsAndBadInput(t *testing.T) {
	const rounds, opsPerRound, restartEvery = 30, 50, 3
	cfg := kernelMapsConfig(t)
	cfg.LBServicesMax, cfg.LBBackendsMax = 40, 16
	retries := func(c *reconciler.Config) { c.LBRetryMaxBackoff = 200 * time.Millisecond }

	maps := bpftest.KernelMaps(t, cfg)
	var current atomic.Pointer[bpf.Maps]
	current.Store(maps)
	violations := make(chan string, 1)
	checks := atomic.Int64{}
	startChecking := func() func() {
		return bpftest.KeepChecking(func() {
			if v := checkMaps(current.Load()); v != "" {
				select {
				case violations <- v:
				default:
				}
			}
			checks.Add(1)
		})
	}
	stopChecking := startChecking()
	defer func() { stopChecking() }()

	// Beside the reader, every write is checked as it is made.
	written, order := checkWriteOrder(maps)
	a := newAgent(t, written, retries)
	a.start(t)
	defer func() { a.stop(t) }()

	r := rand.New(rand.NewPCG(12, 12))
	model := soakModel{}
	backendIDs := backendIDHistory{} // the allocator keeps its marks: no ID goes to another backend
	full := 0
	for round := 1; round <= rounds; round++ {
		for range opsPerRound {
			soakStep(t, a, r, model)
		}
		a.waitSettled(t, maps, time.Minute)
		select {
		case v := <-violations:
			t.Fatalf("round %d: the datapath could have seen a half-written service: %s\n(the maps now:)\n%s", round, v, dumpText(t, maps))
		default:
		}
		if v := order.violations(); len(v) > 0 {
			t.Fatalf("round %d: the writes, in the order made, broke what a datapath relies on: %v\n(the maps now:)\n%s", round, v, dumpText(t, maps))
		}
		if handedOn := backendIDs.see(t, maps); len(handedOn) > 0 {
			t.Errorf("round %d: backend IDs handed to another backend, which flows holding them would follow: %v", round, handedOn)
		}
		if _, failed := a.statuses(); len(failed) > 0 {
			full++
		}
		if round%restartEvery != 0 {
			continue
		}

		// Restart over the same pinned maps; the source declares
		// everything again, then says it has synced.
		served, _ := a.statuses()
		ids := a.frontendIDs()
		stopChecking()
		a.stop(t)
		maps.Close()
		maps = bpftest.KernelMaps(t, cfg)
		current.Store(maps)
		stopChecking = startChecking()
		written, order = checkWriteOrder(maps)
		a = newAgent(t, written, retries)
		done, err := a.w.RegisterInitializer("k8s")
		if err != nil {
			t.Fatal(err)
		}
		a.start(t)
		a.write(t, func(txn statedb.WriteTxn) error {
			for _, i := range slices.Sorted(gomaps.Keys(model)) {
				if err := model.declare(a.w, txn, i); err != nil {
					return err
				}
			}
			done(txn)
			return nil
		})
		a.waitSettled(t, maps, time.Minute)
		after, _ := a.statuses()
		for _, vip := range served {
			if !slices.Contains(after, vip) {
				t.Errorf("round %d: %s was served before the restart, not after", round, vip)
			} else if now := a.frontendIDs()[addr(vip)]; now != ids[addr(vip)] {
				t.Errorf("round %d: %s had ID %d before the restart, %d after", round, vip, ids[addr(vip)], now)
			}
		}
	}
	t.Logf("%d rounds, %d with frontends waiting for room, %d checks of the maps", rounds, full, checks.Load())
	if full < rounds/2 {
		t.Errorf("frontends waited for room in only %d of %d rounds: the maps are too large for the test", full, rounds)
	}
}

// soakStep makes one random change: a service declared with random
// backends from the pool, deleted, or one of its backends released; or
// input the Writer must reject, which must change nothing. It returns
// the service it picked.
func soakStep(t *testing.T, a *agent, r *rand.Rand, model soakModel) int {
	t.Helper()
	i := r.IntN(soakServices)
	name := lb.NewServiceName("soak", fmt.Sprintf("svc-%d", i))
	switch op := r.IntN(10); {
	case op < 5:
		bes := r.Perm(soakPool)[:r.IntN(7)]
		model[i] = bes
		a.write(t, func(txn statedb.WriteTxn) error { return model.declare(a.w, txn, i) })
	case op < 7:
		delete(model, i)
		a.write(t, func(txn statedb.WriteTxn) error { return a.w.DeleteService(txn, name, lb.SourceK8s) })
	case op < 8:
		if len(model[i]) == 0 {
			return i
		}
		b := model[i][r.IntN(len(model[i]))]
		model[i] = slices.DeleteFunc(slices.Clone(model[i]), func(x int) bool { return x == b })
		a.write(t, func(txn statedb.WriteTxn) error {
			return a.w.ReleaseBackends(txn, name, lb.SourceK8s, soakBackend(b))
		})
	default:
		soakRejected(t, a, r, name)
	}
	return i
}

// soakRejected gives the Writer one of several kinds of bad input and
// checks that it says no.
func soakRejected(t *testing.T, a *agent, r *rand.Rand, name lb.ServiceName) {
	t.Helper()
	txn := a.w.WriteTxn()
	defer txn.Abort()
	var err error
	switch r.IntN(3) {
	case 0: // a frontend without a type
		err = a.w.UpsertService(txn, lb.ServiceParams{Name: name, Source: lb.SourceK8s,
			Frontends: []lb.FrontendParams{{Address: addr("10.96.12.200:80/TCP")}}})
	case 1: // a backend without an address
		err = a.w.UpsertBackends(txn, name, lb.SourceK8s, lb.BackendParams{Weight: 1})
	default: // a service without a name
		err = a.w.UpsertService(txn, lb.ServiceParams{Source: lb.SourceK8s,
			Frontends: []lb.FrontendParams{{Address: addr("10.96.12.201:80/TCP"), Type: lb.SVCTypeClusterIP}}})
	}
	if err == nil {
		t.Fatal("the Writer accepted bad input")
	}
}
