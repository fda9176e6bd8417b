package reconciler_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	statedbreconciler "github.com/cilium/statedb/reconciler"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/metrics"
	"github.com/lbstate/lbstate/reconciler"
	"github.com/lbstate/lbstate/tables"
)

// agent is one running instance of the pipeline over given maps.
type agent struct {
	h         *hive.Hive
	log       *slog.Logger
	db        *statedb.DB
	w         *tables.Writer
	frontends statedb.Table[*lb.Frontend]
	rec       statedbreconciler.Reconciler[*lb.Frontend]
	registry  *prometheus.Registry
}

// newAgent builds (but does not start) the pipeline over maps, with cfg
// changing the reconciler's configuration if not nil.
func newAgent(t testing.TB, maps *bpf.Maps, cfg func(*reconciler.Config)) *agent {
	return newAgentLogging(t, maps, cfg, hivetest.Logger(t, hivetest.LogLevel(slog.LevelWarn)))
}

// newAgentLogging is newAgent logging to log.
func newAgentLogging(t testing.TB, maps *bpf.Maps, cfg func(*reconciler.Config), log *slog.Logger) *agent {
	a := &agent{log: log}
	a.h = hive.New(
		statedb.Cell,
		job.Cell,
		cell.SimpleHealthCell,
		metrics.Cell,
		tables.Cell,
		cell.Provide(func() *bpf.Maps { return maps }),
		reconciler.Cell,
		cell.Invoke(func(db *statedb.DB, w *tables.Writer, fes statedb.Table[*lb.Frontend],
			r statedbreconciler.Reconciler[*lb.Frontend], reg *prometheus.Registry) {
			a.db, a.w, a.frontends, a.rec, a.registry = db, w, fes, r, reg
		}),
	)
	if cfg != nil {
		hive.AddConfigOverride(a.h, cfg)
	}
	if err := a.h.Populate(a.log); err != nil {
		t.Fatal(err)
	}
	return a
}

// scrape returns the agent's metrics in Prometheus's text format.
func (a *agent) scrape(t testing.TB) string {
	t.Helper()
	families, err := a.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		if err := enc.Encode(f); err != nil {
			t.Fatal(err)
		}
	}
	return buf.String()
}

func (a *agent) start(t testing.TB) {
	t.Helper()
	if err := a.h.Start(a.log, context.Background()); err != nil {
		t.Fatal(err)
	}
}

// startUnsynced starts an agent over maps whose source has not synced
// yet, as a restarted agent's has not: nothing is pruned until synced
// is called. The agent is stopped when the test ends.
func startUnsynced(t testing.TB, maps *bpf.Maps) (a *agent, synced func()) {
	t.Helper()
	a = newAgent(t, maps, nil)
	done, err := a.w.RegisterInitializer("test")
	if err != nil {
		t.Fatal(err)
	}
	a.start(t)
	t.Cleanup(func() { a.stop(t) })
	return a, func() { a.write(t, func(txn statedb.WriteTxn) error { done(txn); return nil }) }
}

func (a *agent) stop(t testing.TB) {
	t.Helper()
	if err := a.h.Stop(a.log, context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (a *agent) write(t testing.TB, fn func(txn statedb.WriteTxn) error) {
	t.Helper()
	txn := a.w.WriteTxn()
	defer txn.Abort()
	if err := fn(txn); err != nil {
		t.Fatal(err)
	}
	txn.Commit()
}

// waitDone waits until the reconciler has processed every change so far,
// deletions included, and every frontend is reconciled without error.
func (a *agent) waitDone(t testing.TB, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := reconciler.WaitReconciled(ctx, a.rec, a.frontends.Revision(a.db.ReadTxn())); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(timeout)
	for {
		pending, failing := 0, ""
		for fe := range a.frontends.All(a.db.ReadTxn()) {
			if fe.Status.Kind != statedbreconciler.StatusKindDone {
				pending++
				if fe.Status.Kind == statedbreconciler.StatusKindError {
					failing = fmt.Sprintf("%s: %s", fe.Address, fe.Status.GetError())
				}
			}
		}
		if pending == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d frontends not reconciled after %s (e.g. %s)", pending, timeout, failing)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func dumpText(t testing.TB, m *bpf.Maps) string {
	t.Helper()
	d, err := bpf.TakeDump(m)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := d.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func addr(s string) lb.L3n4Addr { return lb.MustParseL3n4Addr(s) }

// declare writes n services, each with a ClusterIP frontend and k
// backends, the odd ones using Maglev.
func declare(t testing.TB, a *agent, first, n, k int) {
	a.write(t, func(txn statedb.WriteTxn) error {
		for i := first; i < first+n; i++ {
			if err := declareOne(a.w, txn, i, k, uint16(lb.DefaultBackendWeight)); err != nil {
				return err
			}
		}
		return nil
	})
}

func serviceName(i int) lb.ServiceName { return lb.NewServiceName("test", fmt.Sprintf("svc-%d", i)) }

func frontendAddr(i int) lb.L3n4Addr {
	return lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), 80, lb.ScopeExternal)
}

func declareOne(w *tables.Writer, txn statedb.WriteTxn, i, k int, weight uint16) error {
	alg := lb.AlgorithmRandom
	if i%2 == 1 {
		alg = lb.AlgorithmMaglev
	}
	name := serviceName(i)
	err := w.UpsertService(txn, lb.ServiceParams{Name: name, Source: lb.SourceK8s, Algorithm: alg,
		Frontends: []lb.FrontendParams{{
			Address: frontendAddr(i),
			Type:    lb.SVCTypeClusterIP,
		}}})
	if err != nil {
		return err
	}
	bes := make([]lb.BackendParams, k)
	for j := range bes {
		bes[j] = lb.BackendParams{
			Address: lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{10, 1, byte(i), byte(j)}), 8080, lb.ScopeExternal),
			Weight:  weight,
		}
	}
	return w.SetBackends(txn, name, lb.SourceK8s, bes...)
}

func smallMapsConfig() bpf.Config {
	cfg := bpf.DefaultConfig
	cfg.LBMaglevTableSize = 251
	// The checkers read the dense ID maps whole, slot by slot: with the
	// defaults' 1M + 256K slots a check costs ~0.3 s of CPU, and too
	// few run during a churn.
	cfg.LBBackendsMax, cfg.LBRevNatMax = 1<<16, 1<<16
	return cfg
}

// kernelMapsConfig is smallMapsConfig pinned in a directory of the test's
// own, for bpftest.KernelMaps.
func kernelMapsConfig(t testing.TB) bpf.Config {
	cfg := smallMapsConfig()
	cfg.LBPinDir = bpftest.Config(t).LBPinDir
	return cfg
}

// memoryMaps returns new in-memory maps with a small Maglev table.
func memoryMaps(t testing.TB) *bpf.Maps {
	t.Helper()
	maps, err := bpf.NewMemoryMaps(smallMapsConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return maps
}

// onBothMapKinds runs fn on in-memory maps and on kernel maps. reopen
// gives the maps a restarted agent opens (the same object for memory maps).
func onBothMapKinds(t *testing.T, fn func(t *testing.T, maps *bpf.Maps, reopen func() *bpf.Maps)) {
	t.Run("memory", func(t *testing.T) {
		maps := memoryMaps(t)
		fn(t, maps, func() *bpf.Maps { return maps })
	})
	t.Run("kernel", func(t *testing.T) {
		cfg := kernelMapsConfig(t)
		fn(t, bpftest.KernelMaps(t, cfg), func() *bpf.Maps { return bpftest.KernelMaps(t, cfg) })
	})
}

// upsert declares one k8s service, test/name, with one ClusterIP frontend
// and exactly the given backends.
func upsert(w *tables.Writer, txn statedb.WriteTxn, name, vip string, alg lb.Algorithm, affinity bool, bes ...lb.BackendParams) error {
	n := lb.NewServiceName("test", name)
	if err := w.UpsertService(txn, lb.ServiceParams{Name: n, Source: lb.SourceK8s, Algorithm: alg, SessionAffinity: affinity,
		Frontends: []lb.FrontendParams{{Address: addr(vip), Type: lb.SVCTypeClusterIP}}}); err != nil {
		return err
	}
	return w.SetBackends(txn, n, lb.SourceK8s, bes...)
}

// be is a backend of weight 100 at s.
func be(s string) lb.BackendParams { return lb.BackendParams{Address: addr(s), Weight: 100} }

func splitLines(s string) []string {
	var out []string
	for _, l := range bytes.Split([]byte(s), []byte("\n")) {
		if len(l) > 0 {
			out = append(out, string(l))
		}
	}
	return out
}

// Under heavy churn, a reader of the kernel maps never sees a slot or a
// Maglev table naming a backend ID absent from lb_backends, nor a master
// entry counting more slots than are present.
func TestNoHalfWrittenServiceUnderChurn(t *testing.T) {
	maps := bpftest.KernelMaps(t, kernelMapsConfig(t))
	a := churn(t, maps, nil, nil)
	defer a.stop(t)
	a.waitDone(t, 20*time.Second)
	a.waitSettled(t, maps, 20*time.Second)
}

// The same holds when the maps are too small for what is declared: the
// frontends that do not fit wait, and write nothing. At rest, every
// frontend is in the maps whole, or lacks room.
func TestNoHalfWrittenServiceUnderChurnInFullMaps(t *testing.T) {
	cfg := kernelMapsConfig(t)
	// Fewer lb_services entries than the 40 services' masters (each holds
	// its slots, bpf.InlineSlots), and fewer lb_backends entries than 40
	// services of 6 backends need on average.
	cfg.LBServicesMax, cfg.LBBackendsMax = 36, 100
	maps := bpftest.KernelMaps(t, cfg)
	a := churn(t, maps, func(c *reconciler.Config) { c.LBRetryMaxBackoff = 200 * time.Millisecond }, fillEachMap)
	defer a.stop(t)
	a.waitSettled(t, maps, 30*time.Second)
}

// fillEachMap makes, midway through the churn and with the checker
// reading, first lb_backends and then lb_services the map that runs out
// (random churn alone filled one or the other only when the reconciler
// happened to see the right intermediate states): from empty maps, 40
// services of 12 backends need 480 of lb_backends' 100 entries, which
// run out (after 8 services) before lb_services' 36 (one master a
// service); 40 services of 2 backends and 5 of them of 3 need 40 of
// lb_services' entries and 85 backends. It waits until each map is
// reported full.
func fillEachMap(t *testing.T, a *agent, maps *bpf.Maps) {
	const services = 40
	for _, fill := range []struct {
		m        string
		backends func(i int) int
	}{
		{"lb_backends", func(int) int { return 12 }},
		{"lb_services", func(i int) int { return 2 + min(1, i/35) }},
	} {
		a.write(t, func(txn statedb.WriteTxn) error {
			for i := range services {
				if err := a.w.ClearRedirect(txn, serviceName(i), lb.SourceRedirect); err != nil {
					return err
				}
				if err := a.w.DeleteService(txn, serviceName(i), lb.SourceK8s); err != nil {
					return err
				}
			}
			return nil
		})
		waitFor(t, 20*time.Second, "the maps empty", func() bool {
			n := 0
			maps.Services.Iterate(func(bpf.ServiceKey, bpf.ServiceValue) bool { n++; return true })
			maps.Backends.Iterate(func(uint32, bpf.Backend) bool { n++; return true })
			return n == 0
		})
		before := metricValue(a.scrape(t), "lbstate_map_full_total", fill.m)
		a.write(t, func(txn statedb.WriteTxn) error {
			for i := range services {
				if err := declareOne(a.w, txn, i, fill.backends(i), lb.DefaultBackendWeight); err != nil {
					return err
				}
			}
			return nil
		})
		waitFor(t, 20*time.Second, fill.m+" reported full", func() bool {
			return metricValue(a.scrape(t), "lbstate_map_full_total", fill.m) > max(0, before)
		})
	}
}

// waitFor polls cond until it holds, or fails the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
	}
}

// churn starts an agent over maps and makes 3000 random changes to 40
// services while a checker reads the maps the way a datapath does; it
// fails the test if the checker ever sees a half-written service.
//
// pressure, if not nil, runs midway, the checker still reading.
func churn(t *testing.T, maps *bpf.Maps, cfg func(*reconciler.Config), pressure func(*testing.T, *agent, *bpf.Maps)) *agent {
	a := newAgent(t, maps, cfg)
	a.start(t)

	violations := make(chan string, 10)
	checks := atomic.Int64{}
	stopChecking := bpftest.KeepChecking(func() {
		if v := checkMaps(maps); v != "" {
			select {
			case violations <- v:
			default:
			}
		}
		checks.Add(1)
	})
	defer stopChecking()

	r := rand.New(rand.NewPCG(7, 7))
	const services, ops = 40, 3000
	for op := range ops {
		i := r.IntN(services)
		a.write(t, func(txn statedb.WriteTxn) error {
			switch r.IntN(6) {
			case 0:
				return a.w.DeleteService(txn, serviceName(i), lb.SourceK8s)
			case 4: // a redirect hides the service's own backends
				to := serviceName(r.IntN(services))
				if to == serviceName(i) {
					return a.w.ClearRedirect(txn, serviceName(i), lb.SourceRedirect)
				}
				return a.w.SetRedirect(txn, serviceName(i), lb.Redirect{Source: lb.SourceRedirect, To: to, SkipFromBackend: r.IntN(2) == 0})
			case 1:
				return declareOne(a.w, txn, i, r.IntN(6), uint16(1+r.IntN(300)))
			default:
				return declareOne(a.w, txn, i, 1+r.IntN(12), lb.DefaultBackendWeight)
			}
		})
		if op%500 == 0 {
			// Let the reconciler catch up at times, and the checker read
			// the maps at least once in every 500 operations however
			// busy the machine (it was starved to 8 checks in a run).
			seen := checks.Load()
			for deadline := time.Now().Add(10 * time.Second); checks.Load() <= seen && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
		}
		if op == ops/2 && pressure != nil {
			pressure(t, a, maps)
		}
	}
	// Let the reconciler finish with the checker still reading.
	deadline := time.Now().Add(20 * time.Second)
	for a.settled(t, maps) != "" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	stopChecking()
	select {
	case v := <-violations:
		t.Fatalf("the datapath could have seen a half-written service: %s", v)
	default:
	}
	t.Logf("%d operations, %d full checks of the maps during them", ops, checks.Load())
	if checks.Load() < ops/500 {
		t.Fatalf("only %d checks ran, fewer than one per 500 operations", checks.Load())
	}
	return a
}

// checkMaps reads the maps the way a datapath would and reports a
// violation it can prove: an entry naming a backend that is missing
// before and after the entry is read again, or a master counting a slot
// that is missing while the master stayed the same. Both lookups are
// needed: a backend ID can come back (a parked backend, or one whose
// batch delete failed, keeps its ID for whoever takes its address back),
// and then, written before the entry that names it, it is there again
// when that entry is. (It once took a backend that an iteration of
// lb_backends skipped, as the kernel's may while the map changes, for a
// missing one; and once, under load, a backend that came back between
// its lookup and the entry's second reading.) That leeway could hide a
// violation repaired soon after, so the soak tests also check every
// write as it is made (checkWriteOrder), which needs none.
func checkMaps(m *bpf.Maps) string {
	type slotRef struct {
		key bpf.ServiceKey
		id  uint32
	}
	var slots []slotRef
	masters := map[bpf.ServiceKey]bpf.ServiceValue{}
	m.Services.Iterate(func(k bpf.ServiceKey, v bpf.ServiceValue) bool {
		if k.Slot == 0 {
			masters[k] = v
			for s, id := range v.Inline() { // the master's own slots
				sk := k
				sk.Slot = uint16(s + 1)
				slots = append(slots, slotRef{sk, id})
			}
		} else {
			slots = append(slots, slotRef{k, v.BackendID})
		}
		return true
	})
	tables := map[uint32][]uint32{}
	m.Maglev.Iterate(func(id uint32, table []uint32) bool {
		tables[id] = table
		return true
	})
	backends := map[uint32]bool{}
	m.Backends.Iterate(func(id uint32, _ bpf.Backend) bool {
		backends[id] = true
		return true
	})
	// An iteration of a kernel map that changes under it may miss keys:
	// a backend it did not see is looked up.
	missing := func(id uint32) bool {
		if backends[id] {
			return false
		}
		_, ok, _ := m.Backends.Lookup(id)
		return !ok
	}
	for _, s := range slots {
		if !missing(s.id) {
			continue
		}
		if id, ok := slotAgain(m, s.key); ok && id == s.id && missing(s.id) {
			return fmt.Sprintf("slot %d of %s names backend %d, which is not in lb_backends", s.key.Slot, s.key.L3n4Addr(), s.id)
		}
	}
	for id, table := range tables {
		for _, b := range table {
			if !missing(b) {
				continue
			}
			if again, ok, _ := m.Maglev.Lookup(id); ok && contains(again, b) && missing(b) {
				return fmt.Sprintf("Maglev table %d names backend %d, which is not in lb_backends", id, b)
			}
			break
		}
	}
	for k, v := range masters {
		for slot := bpf.InlineSlots + 1; slot <= int(v.Count)+int(v.Standby)+int(v.Fallback); slot++ {
			sk := k
			sk.Slot = uint16(slot)
			if _, ok, _ := m.Services.Lookup(sk); ok {
				continue
			}
			if again, ok, _ := m.Services.Lookup(k); ok && again == v {
				return fmt.Sprintf("master of %s counts %d slots but slot %d is missing", k.L3n4Addr(), v.Count+v.Standby+v.Fallback, slot)
			}
			break
		}
	}
	return ""
}

// slotAgain reads the backend ID of the slot that key names once more:
// from its entry, or, for an inline slot, from its master.
func slotAgain(m *bpf.Maps, key bpf.ServiceKey) (uint32, bool) {
	slot := int(key.Slot)
	key.Slot = 0
	master, ok, _ := m.Services.Lookup(key)
	if !ok {
		return 0, false
	}
	id, ok, _ := bpf.SlotBackend(m.Services, key.L3n4Addr(), master, slot)
	return id, ok
}

func contains(xs []uint32, x uint32) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// With 10% of map operations failing, the reconciler retries until the
// maps hold exactly what they hold without faults.
func TestFaultInjectionConverges(t *testing.T) {
	run := func(faults *bpftest.Faults) string {
		maps, err := bpf.NewMemoryMaps(smallMapsConfig(), faults)
		if err != nil {
			t.Fatal(err)
		}
		a := newAgent(t, maps, func(c *reconciler.Config) { c.LBRetryMaxBackoff = 200 * time.Millisecond })
		// Declare everything before the reconciler starts, so that both
		// runs reconcile the same objects in the same order.
		declare(t, a, 0, 60, 4)
		a.start(t)
		defer a.stop(t)
		a.waitDone(t, 60*time.Second)
		// Then churn: shrink some, delete some, grow some.
		a.write(t, func(txn statedb.WriteTxn) error {
			for i := 0; i < 60; i += 3 {
				if err := declareOne(a.w, txn, i, 2, 50); err != nil {
					return err
				}
				if err := a.w.DeleteService(txn, serviceName(i+1), lb.SourceK8s); err != nil {
					return err
				}
				if err := declareOne(a.w, txn, i+2, 7, lb.DefaultBackendWeight); err != nil {
					return err
				}
			}
			return nil
		})
		a.waitDone(t, 60*time.Second)
		if faults != nil {
			faults.SetProbability(0)
		}
		return dumpText(t, maps)
	}
	want := run(nil)
	faults := bpftest.NewFaults(0.10, 42)
	got := run(faults)
	t.Logf("%d faults injected", faults.Injected())
	if faults.Injected() < 50 {
		t.Fatalf("only %d faults injected", faults.Injected())
	}
	if got != want {
		t.Fatalf("with faults the maps differ:\n--- without faults\n%s--- with faults\n%s", want, got)
	}
	if len(splitLines(want)) < 200 {
		t.Fatalf("the dump has only %d lines; the test declares too little", len(splitLines(want)))
	}
}

// The reconciler's metrics are in the hive's registry, with the update
// operations it ran counted.
func TestMetrics(t *testing.T) {
	maps, err := bpf.NewMemoryMaps(smallMapsConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, maps, nil)
	declare(t, a, 0, 5, 1)
	a.start(t)
	defer a.stop(t)
	a.waitDone(t, 10*time.Second)

	out := a.scrape(t)
	for _, want := range []string{
		"# TYPE lbstate_reconciler_duration_seconds histogram",
		`lbstate_reconciler_duration_seconds_count{operation="update"} `,
		"# TYPE lbstate_reconciler_failing_frontends gauge",
		"lbstate_reconciler_failing_frontends 0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %q:\n%s", want, out)
		}
	}
	var count int
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, `lbstate_reconciler_duration_seconds_count{operation="update"}`) {
			fmt.Sscanf(line[strings.LastIndex(line, " ")+1:], "%d", &count)
		}
	}
	if count < 1 {
		t.Errorf("no update operations counted:\n%s", out)
	}
}

// Affinity entries are the datapath's, but when a frontend drops a
// backend the reconciler deletes the entries pinning clients to it, and
// only those.
func TestAffinityClearedForDroppedBackends(t *testing.T) {
	maps, err := bpf.NewMemoryMaps(smallMapsConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, maps, nil)
	a.start(t)
	defer a.stop(t)
	name := lb.NewServiceName("default", "sticky")
	vip := addr("10.96.0.1:80/TCP")
	b1, b2 := addr("10.0.0.1:80/TCP"), addr("10.0.0.2:80/TCP")
	a.write(t, func(txn statedb.WriteTxn) error {
		if err := a.w.UpsertService(txn, lb.ServiceParams{Name: name, Source: lb.SourceK8s, SessionAffinity: true,
			Frontends: []lb.FrontendParams{{Address: vip, Type: lb.SVCTypeClusterIP}}}); err != nil {
			return err
		}
		return a.w.UpsertBackends(txn, name, lb.SourceK8s,
			lb.BackendParams{Address: b1, Weight: 100}, lb.BackendParams{Address: b2, Weight: 100})
	})
	a.waitDone(t, 10*time.Second)
	// Another service with the same backend b1.
	a.write(t, func(txn statedb.WriteTxn) error {
		other := lb.NewServiceName("default", "other")
		if err := a.w.UpsertService(txn, lb.ServiceParams{Name: other, Source: lb.SourceK8s, SessionAffinity: true,
			Frontends: []lb.FrontendParams{{Address: addr("10.96.0.2:80/TCP"), Type: lb.SVCTypeClusterIP}}}); err != nil {
			return err
		}
		return a.w.UpsertBackends(txn, other, lb.SourceK8s, lb.BackendParams{Address: b1, Weight: 100})
	})
	a.waitDone(t, 10*time.Second)
	fe, _, _ := a.frontends.Get(a.db.ReadTxn(), tables.FrontendByAddress.Query(vip))
	otherFE, _, _ := a.frontends.Get(a.db.ReadTxn(), tables.FrontendByAddress.Query(addr("10.96.0.2:80/TCP")))
	ids := map[lb.L3n4Addr]uint32{}
	maps.Backends.Iterate(func(id uint32, v bpf.Backend) bool { ids[v.L3n4Addr()] = id; return true })

	// The datapath pinned two clients, one to each backend, and a client
	// of the other frontend to b1.
	client := func(s string) bpf.AffinityKey {
		return bpf.AffinityKey{Client: netip.MustParseAddr(s).As16(), RevNatID: fe.ID}
	}
	other := client("192.0.2.3")
	other.RevNatID = otherFE.ID
	for k, backend := range map[bpf.AffinityKey]uint32{client("192.0.2.1"): ids[b1], client("192.0.2.2"): ids[b2], other: ids[b1]} {
		if err := maps.Affinity.Update(k, bpf.AffinityValue{BackendID: backend}); err != nil {
			t.Fatal(err)
		}
	}

	a.write(t, func(txn statedb.WriteTxn) error { return a.w.ReleaseBackends(txn, name, lb.SourceK8s, b1) })
	a.waitDone(t, 10*time.Second)
	if _, ok, _ := maps.Affinity.Lookup(client("192.0.2.1")); ok {
		t.Error("the client pinned to the dropped backend is still pinned")
	}
	if _, ok, _ := maps.Affinity.Lookup(client("192.0.2.2")); !ok {
		t.Error("the client pinned to the remaining backend lost its entry")
	}
	if _, ok, _ := maps.Affinity.Lookup(other); !ok {
		t.Error("another frontend's entry was deleted")
	}

	// Deleting frontends together clears the entries of each, and only
	// theirs: a third frontend keeps its own.
	third := lb.NewServiceName("default", "third")
	a.write(t, func(txn statedb.WriteTxn) error {
		if err := a.w.UpsertService(txn, lb.ServiceParams{Name: third, Source: lb.SourceK8s, SessionAffinity: true,
			Frontends: []lb.FrontendParams{{Address: addr("10.96.0.3:80/TCP"), Type: lb.SVCTypeClusterIP}}}); err != nil {
			return err
		}
		return a.w.UpsertBackends(txn, third, lb.SourceK8s, lb.BackendParams{Address: b2, Weight: 100})
	})
	a.waitDone(t, 10*time.Second)
	thirdFE, _, _ := a.frontends.Get(a.db.ReadTxn(), tables.FrontendByAddress.Query(addr("10.96.0.3:80/TCP")))
	kept := client("192.0.2.4")
	kept.RevNatID = thirdFE.ID
	if err := maps.Affinity.Update(kept, bpf.AffinityValue{BackendID: ids[b2]}); err != nil {
		t.Fatal(err)
	}
	a.write(t, func(txn statedb.WriteTxn) error {
		if err := a.w.DeleteService(txn, name, lb.SourceK8s); err != nil {
			return err
		}
		return a.w.DeleteService(txn, lb.NewServiceName("default", "other"), lb.SourceK8s)
	})
	a.waitDone(t, 10*time.Second)
	for _, k := range []bpf.AffinityKey{client("192.0.2.2"), other} {
		if _, ok, _ := maps.Affinity.Lookup(k); ok {
			t.Errorf("the entry %+v of a deleted frontend is still there", k)
		}
	}
	if _, ok, _ := maps.Affinity.Lookup(kept); !ok {
		t.Error("the frontend still there lost its entry")
	}
}
