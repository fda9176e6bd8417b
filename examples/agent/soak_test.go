package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	statedbreconciler "github.com/cilium/statedb/reconciler"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors/clustermesh"
)

// soakEnv runs the soak test, with as many rounds as it says (1 or more);
// without it the test is skipped, as it takes about a minute.
const soakEnv = "LBSTATE_SOAK"

// soakRound is the least a round lasts: the agent soaks in the hostile
// endpoints meanwhile (their probes time out after 10s, so every other
// round sees slots freed and taken again), and a checker reads its maps.
const soakRound = 5 * time.Second

// soakAgent is the agent under soak: examples/agent's composition, on
// kernel maps, with every source the soak world feeds.
type soakAgent struct {
	h        *hive.Hive
	log      *slog.Logger
	view     agentView
	gatherer prometheus.Gatherer
}

func startSoakAgent(t *testing.T, w *soakWorld, pinDir string, log *slog.Logger) *soakAgent {
	t.Helper()
	a := &soakAgent{log: log}
	capture := cell.Invoke(func(db *statedb.DB, fes statedb.Table[*lb.Frontend], bes statedb.Table[*lb.Backend], maps *bpf.Maps, g prometheus.Gatherer) {
		a.view = agentView{db: db, frontends: fes, backends: bes, maps: maps}
		a.gatherer = g
	})
	for attempt := 0; ; attempt++ {
		h, _, err := newAgent([]string{"--manifests", w.manifests, "--k8s-node-name", "node-a",
			"--lb-maps", "kernel", "--lb-pin-dir", pinDir, "--api-addr", freeAddr(t), "--metrics-addr", freeAddr(t),
			"--health", "--health-networks", "127.0.0.0/8", "--health-max-concurrent", "32",
			"--health-backoff-min", "200ms", "--health-backoff-max", "2s",
			"--cluster-name", soakCluster, "--cluster-id", "1", "--clustermesh-config", w.meshDir,
			"--clustermesh-export", w.export, "--clustermesh-sync-timeout", "5s"}, capture)
		must(t, err)
		err = h.Start(log, context.Background())
		if err != nil {
			h.Stop(log, context.Background())
		}
		if errors.Is(err, syscall.EADDRINUSE) && attempt < 5 {
			continue // a port freeAddr found was taken meanwhile
		}
		must(t, err)
		a.h = h
		return a
	}
}

func (a *soakAgent) stop(t *testing.T) {
	t.Helper()
	if a.h != nil {
		must(t, a.h.Stop(a.log, context.Background()))
		a.h = nil
	}
}

// eventually polls cond until it returns "" or the deadline passes, then
// fails with what it last said.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		v := cond()
		if v == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %s", what, timeout, v)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The agent soaks in everything that once hurt it, round after round:
// 200 hostile health endpoints (silent, endless headers, 100 MB bodies,
// slowloris, resets) beside a service whose backends must still be
// judged on time; a FIFO and a link to /dev/zero in every directory it
// reads and as the TLS files its configs name; manifests and remote
// clusters (in a real etcd) that change every round; a second agent
// trying its pin directory; agents given a FIFO or /dev/zero as their
// export config; and restarts over the same pins. After each round the
// tables and the kernel maps agree (every frontend Done, every slot
// naming one of its own backends in lb_backends, a checker reading the
// maps all along never saw otherwise), the sources' input is in the
// tables, memory grew by less than 50 MB, and no hostile file is open.
// Set LBSTATE_SOAK=N to run N rounds (docs/testing.md).
func TestSoakAgentHostileInputsAndSecondAgent(t *testing.T) {
	rounds, err := strconv.Atoi(os.Getenv(soakEnv))
	if err != nil || rounds < 1 {
		t.Skipf("the agent's soak takes about a minute: set %s=ROUNDS to run it (7 is the documented run)", soakEnv)
	}
	bpftest.Require(t)
	// Cleanups run last first: this one, registered before the bpffs
	// mount's, runs after it and checks that nothing is left.
	var pinRoot string
	t.Cleanup(func() {
		if pinRoot != "" && mounted(t, pinRoot) {
			t.Errorf("the soak's bpffs at %s is still mounted", pinRoot)
		}
	})
	pinRoot = bpftest.PinDir(t)
	pinDir := filepath.Join(pinRoot, "maps")
	w := newSoakWorld(t)
	logFile, err := os.Create(filepath.Join(w.dir, "agent.log"))
	must(t, err)
	defer logFile.Close()
	log := newLogger(logFile, false)

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d; the agent's log: %s", seed, logFile.Name())
	r := rand.New(rand.NewPCG(seed, 28))

	a := startSoakAgent(t, w, pinDir, log)
	defer func() { a.stop(t) }()
	// A checker reads the maps as a datapath does, all along but during
	// restarts (a map is not read while it is closed).
	violation := make(chan string, 1)
	startChecking := func(m *bpf.Maps) func() {
		return bpftest.KeepChecking(func() {
			if v := slotsNameBackends(m); v != "" {
				select {
				case violation <- v:
				default:
				}
			}
			time.Sleep(5 * time.Millisecond) // a datapath's pace, leaving the CPU to the agent
		})
	}
	stopChecking := startChecking(a.view.maps)
	defer func() { stopChecking() }()

	// Memory's baseline: the agent running, its checked backends
	// judged healthy, before any hostile endpoint is declared.
	heapWatch := watchHeap()
	defer heapWatch.stop()
	eventually(t, time.Minute, "the checked service's backends probed", func() string {
		if n := len(a.view.backendsOf(checkedVIP)); n != checkedBackends {
			return fmt.Sprintf("%s has %d backends", checkedVIP, n)
		}
		return ""
	})
	eventually(t, 30*time.Second, "the tables and the maps agree", a.view.agree)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseHeap, baseRSS := int64(ms.HeapAlloc), procStatus(t, "VmRSS")
	heapWatch.take()
	resetPeakRSS()
	t.Logf("before the hostile endpoints: heap %d MB, RSS %d MB", baseHeap>>20, baseRSS>>20)
	write(t, filepath.Join(w.manifests, "health.yaml"), w.healthYAML(true))

	failing := -1
	var trips []time.Duration
	probes := map[string]float64{} // by result, over every start
	for round := 1; round <= rounds; round++ {
		roundEnd := time.Now().Add(soakRound)
		w.changeManifests(t, r, round)
		w.changeRemote(t, round)
		prev := failing
		failing = round % checkedBackends
		if prev >= 0 {
			w.checked[prev].failing.Store(false)
		}
		w.checked[failing].failing.Store(true)
		failedAt := time.Now()

		secondAgentRefused(t, w, pinDir, []string{"kernel", "auto"}[round%2])
		exportConfigsRefused(t, w)

		// The failing backend is judged on time, though hostile probes
		// hold their slots; the recovered one comes back.
		bad := w.checked[failing].addr.String()
		eventually(t, time.Minute, "the checked service's failing backend tripped", func() string {
			if a.view.unhealthy(bad) {
				return ""
			}
			return bad + " is not judged unhealthy"
		})
		trip := time.Since(failedAt)
		trips = append(trips, trip)
		if trip > checkedTripBound() {
			t.Errorf("round %d: %s tripped %s after it failed, want within %s (3 probes every %s): probes of good backends waited",
				round, bad, trip.Round(time.Millisecond), checkedTripBound(), checkedInterval)
		}
		eventually(t, 30*time.Second, "the checked service's other backends healthy", func() string {
			for i, e := range w.checked {
				if i != failing && a.view.unhealthy(e.addr.String()) {
					return e.addr.String() + " is judged unhealthy"
				}
			}
			return ""
		})

		eventually(t, 30*time.Second, "the sources' input in the tables", func() string { return w.inTables(&a.view) })
		for time.Now().Before(roundEnd) {
			eventually(t, 30*time.Second, "the tables and the maps agree", a.view.agree)
			time.Sleep(100 * time.Millisecond)
		}
		eventually(t, 30*time.Second, "the tables and the maps agree", a.view.agree)
		select {
		case v := <-violation:
			t.Fatalf("round %d: the datapath could have seen a slot naming a missing backend: %s", round, v)
		default:
		}
		if open := openHostileFiles(t, w.hostileFiles); len(open) > 0 {
			t.Errorf("round %d: the agent keeps hostile files open: %v", round, open)
		}
		if round == 1 {
			w.checkRefusalsLogged(t, logFile.Name())
			w.checkExported(t)
		}

		// Memory: the hostile endpoints grow the agent's by less
		// than 50 MB, at rest and at the peaks between two checks.
		runtime.GC()
		runtime.ReadMemStats(&ms)
		heap, heapPeak, rss, rssPeak := int64(ms.HeapAlloc), heapWatch.take(), procStatus(t, "VmRSS"), procStatus(t, "VmHWM")
		resetPeakRSS()
		t.Logf("round %d: heap %d MB (peak %d MB), RSS %d MB (peak %d MB), tripped in %s, %d goroutines",
			round, heap>>20, heapPeak>>20, rss>>20, rssPeak>>20, trip.Round(time.Millisecond), runtime.NumGoroutine())
		switch {
		case heap-baseHeap >= 50<<20:
			t.Errorf("round %d: live heap %d MB, %d MB before the hostile endpoints: grown by 50 MB or more", round, heap>>20, baseHeap>>20)
		case heapPeak-2*baseHeap >= 50<<20: // twice: the collector's headroom (GOGC=100)
			t.Errorf("round %d: heap peaked at %d MB, over twice the live heap before the hostile endpoints (%d MB) by 50 MB or more", round, heapPeak>>20, baseHeap>>20)
		case rssPeak-baseRSS >= 50<<20 && !raceEnabled:
			t.Errorf("round %d: RSS peaked at %d MB, %d MB before the hostile endpoints: grown by 50 MB or more", round, rssPeak>>20, baseRSS>>20)
		}

		if round%3 == 0 && round < rounds {
			addProbeCounts(t, a.gatherer, probes)
			stopChecking()
			a = restartSoakAgent(t, a, w, pinDir, log)
			stopChecking = startChecking(a.view.maps)
		}
	}
	slices.Sort(trips)
	t.Logf("%d rounds: failing backend tripped in %s (median), %s (max)", rounds, trips[len(trips)/2], trips[len(trips)-1])
	addProbeCounts(t, a.gatherer, probes)
	t.Logf("probes by result: %v", probes)
	if rounds*int(soakRound) > int(20*time.Second) && (probes["timeout"] == 0 || probes["failure"] == 0) {
		t.Errorf("no probe timed out or failed (%v): the hostile endpoints were not probed", probes)
	}
}

// addProbeCounts adds lbstate_health_probes_total to out by result.
func addProbeCounts(t *testing.T, g prometheus.Gatherer, out map[string]float64) {
	t.Helper()
	mfs, err := g.Gather()
	must(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "lbstate_health_probes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
}

// restartSoakAgent stops the agent and starts another over the same pins
// and world: every frontend keeps its ID.
func restartSoakAgent(t *testing.T, a *soakAgent, w *soakWorld, pinDir string, log *slog.Logger) *soakAgent {
	t.Helper()
	ids := map[lb.L3n4Addr]uint32{}
	for fe := range a.view.frontends.All(a.view.db.ReadTxn()) {
		ids[fe.Address] = fe.ID
	}
	a.stop(t)
	a = startSoakAgent(t, w, pinDir, log)
	// Every frontend back and reconciled before IDs are compared: one
	// not reconciled yet has ID 0.
	eventually(t, 30*time.Second, "the restarted agent's frontends reconciled", func() string {
		txn := a.view.db.ReadTxn()
		for addr := range ids {
			fe, _, ok := a.view.frontends.Get(txn, frontendByAddr(addr))
			switch {
			case !ok:
				return addr.String() + " is not in the table"
			case fe.Status.Kind != statedbreconciler.StatusKindDone:
				return fmt.Sprintf("%s is %s", addr, fe.Status.Kind)
			}
		}
		return w.inTables(&a.view)
	})
	eventually(t, 30*time.Second, "the restarted agent's tables and maps agree", a.view.agree)
	txn := a.view.db.ReadTxn()
	for addr, was := range ids {
		if fe, _, ok := a.view.frontends.Get(txn, frontendByAddr(addr)); ok && fe.ID != was {
			t.Errorf("after a restart %s has ID %d, had %d", addr, fe.ID, was)
		}
	}
	return a
}

// resetPeakRSS starts the process's peak RSS (VmHWM) over from now.
func resetPeakRSS() {
	os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// inTables reports what of the world is not in the agent's tables yet:
// the churn services with their backends, soak/web with its own backends
// and the current remote cluster's, and no others.
func (w *soakWorld) inTables(v *agentView) string {
	for i := range churnServices {
		got := v.backendsOf(churnVIP(i))
		n, declared := w.churn[i]
		if !declared {
			if got != nil {
				return churnVIP(i) + " is in the table, deleted from the manifests"
			}
			continue
		}
		var want []string
		for j := range n {
			want = append(want, churnBackend(i, j))
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			return churnVIP(i) + ": backends " + strings.Join(got, ",") + ", want " + strings.Join(want, ",")
		}
	}
	want := []string{"10.1.200.1:8080", "10.1.200.2:8080", w.remoteBackend(0) + ":8080", w.remoteBackend(1) + ":8080"}
	slices.Sort(want)
	if got := v.backendsOf(webVIP); !slices.Equal(got, want) {
		return webVIP + ": backends " + strings.Join(got, ",") + ", want " + strings.Join(want, ",") + " (remote cluster " + w.remote + ")"
	}
	return ""
}

// checkRefusalsLogged checks that every hostile file the agent read was
// refused with an error naming it.
func (w *soakWorld) checkRefusalsLogged(t *testing.T, logPath string) {
	t.Helper()
	var named []string
	for _, f := range w.hostileFiles {
		if !strings.Contains(f, "/export/") { // the agent's own export config is another file
			named = append(named, f)
		}
	}
	eventually(t, 30*time.Second, "every hostile file refused by name in the log", func() string {
		data, err := os.ReadFile(logPath)
		if err != nil {
			return err.Error()
		}
		for _, f := range named {
			if !strings.Contains(string(data), f) && !strings.Contains(string(data), filepath.Base(f)+": not a regular file") {
				return "the log does not name " + f
			}
		}
		return ""
	})
}

// checkExported checks that the agent exported soak/web, with its own
// backends only, to the mesh's etcd.
func (w *soakWorld) checkExported(t *testing.T) {
	t.Helper()
	key := clustermesh.ServiceKey(soakCluster, soakNS, "web")
	eventually(t, 30*time.Second, "soak/web exported", func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := w.kv.Get(ctx, key)
		if err != nil || len(resp.Kvs) == 0 {
			return "no key " + key
		}
		svc, err := clustermesh.DecodeService(key, resp.Kvs[0].Value)
		if err != nil {
			return err.Error()
		}
		if len(svc.Backends) != 2 || svc.Backends["10.1.200.1"] == nil || svc.Backends["10.1.200.2"] == nil {
			return "exported backends " + string(resp.Kvs[0].Value)
		}
		return ""
	})
}
