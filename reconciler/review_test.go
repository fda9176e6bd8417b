package reconciler_test

// Regression tests from a review of the maps and the reconciler. Each
// test's comment describes the bug it caught (fixed since).

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// reviewKinds runs fn on in-memory maps and on kernel maps. reopen gives
// the maps a restarted agent opens (the same object for memory maps).
func reviewKinds(t *testing.T, fn func(t *testing.T, maps *bpf.Maps, reopen func() *bpf.Maps)) {
	t.Run("memory", func(t *testing.T) {
		maps, err := bpf.NewMemoryMaps(smallMapsConfig(), nil)
		if err != nil {
			t.Fatal(err)
		}
		fn(t, maps, func() *bpf.Maps { return maps })
	})
	t.Run("kernel", func(t *testing.T) {
		cfg := smallMapsConfig()
		cfg.LBPinDir = bpftest.Config(t).LBPinDir
		fn(t, bpftest.KernelMaps(t, cfg), func() *bpf.Maps { return bpftest.KernelMaps(t, cfg) })
	})
}

// upsert declares one k8s service with one ClusterIP frontend and exactly
// the given backends.
func upsert(w interface {
	UpsertService(statedb.WriteTxn, lb.ServiceParams) error
	SetBackends(statedb.WriteTxn, lb.ServiceName, lb.Source, ...lb.BackendParams) error
}, txn statedb.WriteTxn, name, vip string, alg lb.Algorithm, affinity bool, bes ...lb.BackendParams) error {
	n := lb.NewServiceName("review", name)
	if err := w.UpsertService(txn, lb.ServiceParams{Name: n, Source: lb.SourceK8s, Algorithm: alg, SessionAffinity: affinity,
		Frontends: []lb.FrontendParams{{Address: addr(vip), Type: lb.SVCTypeClusterIP}}}); err != nil {
		return err
	}
	return w.SetBackends(txn, n, lb.SourceK8s, bes...)
}

func be(s string) lb.BackendParams { return lb.BackendParams{Address: addr(s), Weight: 100} }

// flakyServices makes lb_services' BatchDelete, while armed, delete only
// the first key and then fail: the Map contract allows exactly that ("On
// error, a prefix of the entries may have been applied"), and the kernel
// and memory maps (with Faults) do it.
type flakyServices struct {
	bpf.Map[bpf.ServiceKey, bpf.ServiceValue]
	armed atomic.Bool
	fired atomic.Int32
}

func (f *flakyServices) BatchDelete(ks []bpf.ServiceKey) error {
	if f.armed.Load() && len(ks) > 1 {
		f.fired.Add(1)
		if err := f.Map.Delete(ks[0]); err != nil {
			return err
		}
		return fmt.Errorf("%s: batch delete: injected failure after 1 of %d keys", f.Name(), len(ks))
	}
	return f.Map.BatchDelete(ks)
}

func withFlakyServices(maps *bpf.Maps) (*bpf.Maps, *flakyServices) {
	m := *maps
	f := &flakyServices{Map: maps.Services}
	m.Services = f
	return &m, f
}

func waitFired(t *testing.T, f *flakyServices) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for f.fired.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the injected BatchDelete failure never fired")
		}
		time.Sleep(time.Millisecond)
	}
}

func fourBackends(n int) []lb.BackendParams {
	out := []lb.BackendParams{be("10.3.0.1:8080/TCP"), be("10.3.0.2:8080/TCP"), be("10.3.0.3:8080/TCP"), be("10.3.0.4:8080/TCP")}
	return out[:n]
}

// A random frontend shrinks from 4 slots to 2; deleting slots 3 and 4
// fails after slot 3 is gone. Before the retry, the frontend grows back to
// the same 4 backends. writeSlots trusts st.written (still [a b c d],
// since the shrink wrote no slot and deleteSlots did not truncate it on
// failure) and writes nothing; the master is rewritten with count=4. Slot
// 3 stays missing for good: a master counting a missing slot.
func TestReviewPartialSlotDeleteThenRegrow(t *testing.T) {
	reviewKinds(t, func(t *testing.T, raw *bpf.Maps, _ func() *bpf.Maps) {
		maps, flaky := withFlakyServices(raw)
		a := newAgent(t, maps, nil)
		a.start(t)
		defer a.stop(t)
		vip := "10.96.5.1:80/TCP"
		a.write(t, func(txn statedb.WriteTxn) error {
			return upsert(a.w, txn, "grow", vip, lb.AlgorithmRandom, false, fourBackends(4)...)
		})
		a.waitDone(t, 10*time.Second)

		flaky.armed.Store(true)
		a.write(t, func(txn statedb.WriteTxn) error {
			return upsert(a.w, txn, "grow", vip, lb.AlgorithmRandom, false, fourBackends(2)...)
		})
		waitFired(t, flaky)
		a.write(t, func(txn statedb.WriteTxn) error {
			return upsert(a.w, txn, "grow", vip, lb.AlgorithmRandom, false, fourBackends(4)...)
		})
		a.waitDone(t, 10*time.Second)
		flaky.armed.Store(false)
		a.waitDone(t, 10*time.Second)
		if v := checkMaps(raw); v != "" {
			t.Fatalf("at rest, after the frontend grew back: %s\n%s", v, dumpText(t, raw))
		}
	})
}

// Delete of a frontend fails in the middle of deleting its slots (master
// and slot 1 gone); the frontend is declared again, with the same
// backends, before the retry (statedb drops the pending delete). Update
// finds st.written still [a b c d] and writes no slot, then writes a
// master with count=4: slot 1 is missing for good.
func TestReviewPartialDeleteThenReAdd(t *testing.T) {
	reviewKinds(t, func(t *testing.T, raw *bpf.Maps, _ func() *bpf.Maps) {
		maps, flaky := withFlakyServices(raw)
		a := newAgent(t, maps, nil)
		a.start(t)
		defer a.stop(t)
		vip := "10.96.5.2:80/TCP"
		a.write(t, func(txn statedb.WriteTxn) error {
			return upsert(a.w, txn, "readd", vip, lb.AlgorithmRandom, false, fourBackends(4)...)
		})
		a.waitDone(t, 10*time.Second)

		flaky.armed.Store(true)
		a.write(t, func(txn statedb.WriteTxn) error {
			return a.w.DeleteService(txn, lb.NewServiceName("review", "readd"), lb.SourceK8s)
		})
		waitFired(t, flaky)
		a.write(t, func(txn statedb.WriteTxn) error {
			return upsert(a.w, txn, "readd", vip, lb.AlgorithmRandom, false, fourBackends(4)...)
		})
		a.waitDone(t, 10*time.Second)
		flaky.armed.Store(false)
		a.waitDone(t, 10*time.Second)
		if v := checkMaps(raw); v != "" {
			t.Fatalf("at rest, after the frontend came back: %s\n%s", v, dumpText(t, raw))
		}
	})
}

// sharedBackendRestart: services a and b share backend X. After a
// restart (sources not yet synced, so nothing is pruned), b is declared
// again without X. b's update adopts X from the restored state with one
// reference (b's own), drops it and deletes X from lb_backends, although
// a's restored (not yet claimed) slot still names X's ID.
func sharedBackendRestart(t *testing.T, maps *bpf.Maps, reopen func() *bpf.Maps) (*agent, *bpf.Maps) {
	x, y := be("10.4.0.1:8080/TCP"), be("10.4.0.2:8080/TCP")
	a1 := newAgent(t, maps, nil)
	a1.start(t)
	a1.write(t, func(txn statedb.WriteTxn) error {
		if err := upsert(a1.w, txn, "a", "10.96.6.1:80/TCP", lb.AlgorithmRandom, false, x); err != nil {
			return err
		}
		return upsert(a1.w, txn, "b", "10.96.6.2:80/TCP", lb.AlgorithmRandom, false, x)
	})
	a1.waitDone(t, 10*time.Second)
	a1.stop(t)
	if maps.Kind == "kernel" {
		maps.Close()
	}

	maps2 := reopen()
	a2 := newAgent(t, maps2, nil)
	if _, err := a2.w.RegisterInitializer("k8s"); err != nil {
		t.Fatal(err)
	}
	a2.start(t)
	a2.write(t, func(txn statedb.WriteTxn) error {
		return upsert(a2.w, txn, "b", "10.96.6.2:80/TCP", lb.AlgorithmRandom, false, y)
	})
	a2.waitDone(t, 10*time.Second)
	return a2, maps2
}

func TestReviewRestoredFrontendKeepsSharedBackend(t *testing.T) {
	reviewKinds(t, func(t *testing.T, maps *bpf.Maps, reopen func() *bpf.Maps) {
		a2, maps2 := sharedBackendRestart(t, maps, reopen)
		defer a2.stop(t)
		if v := checkMaps(maps2); v != "" {
			t.Fatalf("after restart, b dropped the backend it shares with (restored) a: %s\n%s", v, dumpText(t, maps2))
		}
	})
}

// Continuing the scenario above: when a is then declared again (or
// deleted, or pruned), claimFrontend adopts its restored backends with
// o.adoptBackend(X).refs++, and X is in neither o.backends nor
// o.restoredBackends any more: nil pointer dereference, the agent
// crashes. Runs in a child process (memory maps) so the panic is
// contained.
func TestReviewRestoredFrontendClaimPanics(t *testing.T) {
	if os.Getenv("LBSTATE_REVIEW_CHILD") == "1" {
		maps, err := bpf.NewMemoryMaps(smallMapsConfig(), nil)
		if err != nil {
			t.Fatal(err)
		}
		a2, _ := sharedBackendRestart(t, maps, func() *bpf.Maps { return maps })
		a2.write(t, func(txn statedb.WriteTxn) error {
			return upsert(a2.w, txn, "a", "10.96.6.1:80/TCP", lb.AlgorithmRandom, false, be("10.4.0.1:8080/TCP"))
		})
		a2.waitDone(t, 10*time.Second)
		a2.stop(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReviewRestoredFrontendClaimPanics$", "-test.count=1", "-test.timeout=60s")
	cmd.Env = append(os.Environ(), "LBSTATE_REVIEW_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		excerpt := out
		if i := bytes.Index(out, []byte("panic:")); i >= 0 {
			excerpt = out[i:min(len(out), i+1500)]
		}
		t.Fatalf("declaring the restored frontend again: %v\n%s", err, excerpt)
	}
}

// Two services list the same backend address with different states (a:
// active, b: terminating). lb_backends has one entry per address, and
// each frontend's update overwrites it with its own view, so the entry
// reflects whichever frontend was reconciled last: the same tables give
// different maps depending on history.
func TestReviewSharedBackendValueDependsOnHistory(t *testing.T) {
	maps, err := bpf.NewMemoryMaps(smallMapsConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, maps, nil)
	a.start(t)
	defer a.stop(t)
	active := be("10.5.0.1:8080/TCP")
	terminating := active
	terminating.State = lb.BackendTerminating
	other := be("10.5.0.9:8080/TCP")
	a.write(t, func(txn statedb.WriteTxn) error {
		if err := upsert(a.w, txn, "a", "10.96.7.1:80/TCP", lb.AlgorithmRandom, false, active); err != nil {
			return err
		}
		return upsert(a.w, txn, "b", "10.96.7.2:80/TCP", lb.AlgorithmRandom, false, terminating)
	})
	a.waitDone(t, 10*time.Second)
	before := dumpText(t, maps)
	// a gains and loses another backend: the tables end as they began.
	a.write(t, func(txn statedb.WriteTxn) error {
		return upsert(a.w, txn, "a", "10.96.7.1:80/TCP", lb.AlgorithmRandom, false, active, other)
	})
	a.waitDone(t, 10*time.Second)
	a.write(t, func(txn statedb.WriteTxn) error {
		return upsert(a.w, txn, "a", "10.96.7.1:80/TCP", lb.AlgorithmRandom, false, active)
	})
	a.waitDone(t, 10*time.Second)
	if after := dumpText(t, maps); after != before {
		t.Fatalf("same tables, different maps:\n--- before\n%s--- after\n%s", before, after)
	}
}

// Prune succeeds, yet lbstate_reconciler_prune_errors_total counts it:
// statedb calls Metrics.PruneError after every prune, with a nil error
// when it succeeded, and Metrics.PruneError increments unconditionally.
func TestReviewPruneErrorsMetricCountsSuccesses(t *testing.T) {
	maps, err := bpf.NewMemoryMaps(smallMapsConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, maps, nil)
	declare(t, a, 0, 2, 1)
	a.start(t)
	defer a.stop(t)
	a.waitDone(t, 10*time.Second)
	pruneCount := regexp.MustCompile(`lbstate_reconciler_prune_duration_seconds_count ([0-9]+)`)
	var out string
	deadline := time.Now().Add(10 * time.Second)
	for {
		out = a.scrape(t)
		if m := pruneCount.FindStringSubmatch(out); m != nil && m[1] != "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no prune ran:\n%s", out)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The maps hold exactly the two services: nothing failed.
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "lbstate_reconciler_prune_errors_total ") && !strings.HasSuffix(line, " 0") {
			t.Fatalf("a successful prune was counted as a failure: %s\n%s", line, out)
		}
	}
}

// At start, restore reserves only the frontend IDs of master entries.
// IDs still carried by other entries (lb_rev_nat, lb_affinity, lb_maglev,
// lb_src_range), e.g. left by a Delete that failed after removing the
// master, or a crash in the middle of it, are handed out to the first new
// frontend, which then inherits them until the sources have synced and
// Prune runs: here its clients' affinity sends them to another service's
// backend.
func TestReviewNewFrontendGetsIDStillInMaps(t *testing.T) {
	maps, err := bpf.NewMemoryMaps(smallMapsConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Left by frontend 1 (10.96.8.9:80), whose master was deleted; backend
	// 5 belongs to another frontend whose source has not synced yet.
	foreign := addr("10.6.0.9:8080/TCP")
	if err := maps.Backends.Update(5, bpf.NewBackend(lb.BackendRef{Address: foreign, Weight: 1}, 0)); err != nil {
		t.Fatal(err)
	}
	if err := maps.RevNat.Update(1, bpf.NewRevNatValue(addr("10.96.8.9:80/TCP"))); err != nil {
		t.Fatal(err)
	}
	client := bpf.AffinityKey{Client: netip.MustParseAddr("192.0.2.1").As16(), RevNatID: 1}
	if err := maps.Affinity.Update(client, bpf.AffinityValue{BackendID: 5}); err != nil {
		t.Fatal(err)
	}

	a := newAgent(t, maps, nil)
	if _, err := a.w.RegisterInitializer("k8s"); err != nil {
		t.Fatal(err)
	}
	a.start(t)
	defer a.stop(t)
	a.write(t, func(txn statedb.WriteTxn) error {
		return upsert(a.w, txn, "sticky", "10.96.8.1:80/TCP", lb.AlgorithmRandom, true, be("10.6.0.1:8080/TCP"))
	})
	a.waitDone(t, 10*time.Second)
	id, ok := 0, false
	for fe := range a.frontends.All(a.db.ReadTxn()) {
		id, ok = int(fe.ID), true
	}
	if !ok {
		t.Fatal("no frontend")
	}
	if id == 1 {
		v, _, _ := maps.Affinity.Lookup(client)
		t.Fatalf("the new frontend got ID 1, which lb_rev_nat and lb_affinity still carry: client 192.0.2.1 is pinned to backend %d (%s), not a backend of the frontend\n%s",
			v.BackendID, foreign, dumpText(t, maps))
	}
}

// flakyDelete fails the next n single Deletes of lb_services.
type flakyDelete struct {
	bpf.Map[bpf.ServiceKey, bpf.ServiceValue]
	fail atomic.Int32
}

func (f *flakyDelete) Delete(k bpf.ServiceKey) error {
	if f.fail.Add(-1) >= 0 {
		return fmt.Errorf("%s: delete: injected failure", f.Name())
	}
	return f.Map.Delete(k)
}

// The first prune after the sources synced fails once (one map delete).
// Stale services stay in the maps, served by the datapath, until the next
// periodic prune 30 minutes later: prune failures are not retried with
// backoff like the frontends' are.
func TestReviewFailedPruneNotRetried(t *testing.T) {
	raw, err := bpf.NewMemoryMaps(smallMapsConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	a1 := newAgent(t, raw, nil)
	a1.start(t)
	declare(t, a1, 0, 2, 1)
	a1.waitDone(t, 10*time.Second)
	a1.stop(t)

	m := *raw
	flaky := &flakyDelete{Map: raw.Services}
	m.Services = flaky
	a2 := newAgent(t, &m, nil)
	done, err := a2.w.RegisterInitializer("k8s")
	if err != nil {
		t.Fatal(err)
	}
	a2.start(t)
	defer a2.stop(t)
	declare(t, a2, 0, 1, 1) // service 1 is gone
	a2.waitDone(t, 10*time.Second)
	flaky.fail.Store(1)
	a2.write(t, func(txn statedb.WriteTxn) error { done(txn); return nil })
	stale := bpf.NewServiceKey(lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{10, 96, 0, 1}), 80, lb.ScopeExternal), 0)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok, _ := raw.Services.Lookup(stale); !ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("5s after a failed prune, the deleted service is still in the maps (injected failures left: %d):\n%s",
				max(flaky.fail.Load(), 0), dumpText(t, raw))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// "IDs are handed out in increasing order, so a released ID is not
// reused soon": across a restart the allocator restarts right after the
// highest ID still in the maps, so the IDs released just before the
// restart are handed out again at once (conntrack still carries them).
func TestReviewReleasedIDsReusedAfterRestart(t *testing.T) {
	reviewKinds(t, func(t *testing.T, maps *bpf.Maps, reopen func() *bpf.Maps) {
		a1 := newAgent(t, maps, nil)
		a1.start(t)
		a1.write(t, func(txn statedb.WriteTxn) error {
			if err := upsert(a1.w, txn, "keep", "10.96.9.1:80/TCP", lb.AlgorithmRandom, false, be("10.7.0.1:8080/TCP")); err != nil {
				return err
			}
			return upsert(a1.w, txn, "gone", "10.96.9.2:80/TCP", lb.AlgorithmRandom, false, be("10.7.0.2:8080/TCP"))
		})
		a1.waitDone(t, 10*time.Second)
		ids1 := map[string]uint32{}
		for fe := range a1.frontends.All(a1.db.ReadTxn()) {
			ids1[fe.Address.String()] = fe.ID
		}
		// "gone" (frontend 2, backend 2) is deleted; its IDs are released.
		a1.write(t, func(txn statedb.WriteTxn) error {
			return a1.w.DeleteService(txn, lb.NewServiceName("review", "gone"), lb.SourceK8s)
		})
		a1.write(t, func(txn statedb.WriteTxn) error {
			return a1.w.ReleaseBackends(txn, lb.NewServiceName("review", "gone"), lb.SourceK8s, addr("10.7.0.2:8080/TCP"))
		})
		a1.waitDone(t, 10*time.Second)
		a1.stop(t)
		if maps.Kind == "kernel" {
			maps.Close()
		}

		maps2 := reopen()
		a2 := newAgent(t, maps2, nil)
		a2.start(t)
		defer a2.stop(t)
		a2.write(t, func(txn statedb.WriteTxn) error {
			if err := upsert(a2.w, txn, "keep", "10.96.9.1:80/TCP", lb.AlgorithmRandom, false, be("10.7.0.1:8080/TCP")); err != nil {
				return err
			}
			return upsert(a2.w, txn, "new", "10.96.9.3:80/TCP", lb.AlgorithmRandom, false, be("10.7.0.3:8080/TCP"))
		})
		a2.waitDone(t, 10*time.Second)
		for fe := range a2.frontends.All(a2.db.ReadTxn()) {
			if fe.Address.String() == "10.96.9.3:80/TCP" && fe.ID == ids1["10.96.9.2:80/TCP"] {
				t.Errorf("the new frontend got ID %d, released by the deleted frontend just before the restart", fe.ID)
			}
		}
		d := dumpText(t, maps2)
		if strings.Contains(d, "backend 2 10.7.0.3:8080/TCP") {
			t.Errorf("the new backend got ID 2, released just before the restart:\n%s", d)
		}
	})
}

// flakyRevNat fails lb_rev_nat updates while armed.
type flakyRevNat struct {
	bpf.Map[uint32, bpf.RevNatValue]
	armed atomic.Bool
}

func (f *flakyRevNat) Update(k uint32, v bpf.RevNatValue) error {
	if f.armed.Load() {
		return fmt.Errorf("%s: update: injected failure", f.Name())
	}
	return f.Map.Update(k, v)
}

// A new frontend with session affinity: its master (with the affinity
// flag) is written, then the lb_rev_nat write fails, before
// st.affinity is set. The datapath pins a client. The service is then
// deleted and its backend released: removeFrontend skips clearAffinity
// (st.affinity is false) and the backend is deleted and its ID freed
// while an affinity entry still names it ("backends no frontend uses are
// deleted last, after their affinity entries").
func TestReviewAffinityLeftAfterDeleteFollowingFailedUpdate(t *testing.T) {
	raw, err := bpf.NewMemoryMaps(smallMapsConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	m := *raw
	flaky := &flakyRevNat{Map: raw.RevNat}
	flaky.armed.Store(true)
	m.RevNat = flaky
	a := newAgent(t, &m, nil)
	a.start(t)
	defer a.stop(t)
	vip := addr("10.96.10.1:80/TCP")
	a.write(t, func(txn statedb.WriteTxn) error {
		return upsert(a.w, txn, "sticky", vip.String(), lb.AlgorithmRandom, true, be("10.8.0.1:8080/TCP"))
	})
	var master bpf.ServiceValue
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, ok, _ := raw.Services.Lookup(bpf.NewServiceKey(vip, 0))
		if ok {
			master = v
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("master never written")
		}
		time.Sleep(time.Millisecond)
	}
	slot, _, _ := raw.Services.Lookup(bpf.NewServiceKey(vip, 1))
	client := bpf.AffinityKey{Client: netip.MustParseAddr("192.0.2.7").As16(), RevNatID: master.RevNatID}
	if err := raw.Affinity.Update(client, bpf.AffinityValue{BackendID: slot.BackendID}); err != nil {
		t.Fatal(err)
	}
	a.write(t, func(txn statedb.WriteTxn) error {
		n := lb.NewServiceName("review", "sticky")
		if err := a.w.DeleteService(txn, n, lb.SourceK8s); err != nil {
			return err
		}
		return a.w.ReleaseBackends(txn, n, lb.SourceK8s, addr("10.8.0.1:8080/TCP"))
	})
	a.waitDone(t, 10*time.Second)
	flaky.armed.Store(false)
	d := dumpText(t, raw)
	if _, ok, _ := raw.Backends.Lookup(slot.BackendID); !ok {
		if v, ok, _ := raw.Affinity.Lookup(client); ok {
			t.Fatalf("backend %d was deleted while an affinity entry of the deleted frontend still names it (%+v):\n%s", slot.BackendID, v, d)
		}
	}
}

// After a restart, before the sources have synced, a source declares a
// service in one transaction and its backends in the next (the Writer
// takes them in any order). The first update of the restored frontend
// has no backends: it writes count=0 (no backend for new flows) and
// deletes the restored backend from lb_backends, so the backend comes
// back under a new ID and the flows conntrack holds with the old ID break
// ("gives each frontend and backend address its old ID back, so live
// flows keep working"; "prunes nothing a slow source has yet to declare").
func TestReviewRestartServiceBeforeBackendsKeepsBackendID(t *testing.T) {
	reviewKinds(t, func(t *testing.T, maps *bpf.Maps, reopen func() *bpf.Maps) {
		vip := "10.96.11.1:80/TCP"
		x := be("10.9.0.1:8080/TCP")
		a1 := newAgent(t, maps, nil)
		a1.start(t)
		a1.write(t, func(txn statedb.WriteTxn) error {
			return upsert(a1.w, txn, "web", vip, lb.AlgorithmRandom, false, x)
		})
		a1.waitDone(t, 10*time.Second)
		before := dumpText(t, maps)
		a1.stop(t)
		if maps.Kind == "kernel" {
			maps.Close()
		}

		maps2 := reopen()
		a2 := newAgent(t, maps2, nil)
		if _, err := a2.w.RegisterInitializer("k8s"); err != nil {
			t.Fatal(err)
		}
		a2.start(t)
		defer a2.stop(t)
		n := lb.NewServiceName("review", "web")
		a2.write(t, func(txn statedb.WriteTxn) error {
			return a2.w.UpsertService(txn, lb.ServiceParams{Name: n, Source: lb.SourceK8s,
				Frontends: []lb.FrontendParams{{Address: addr(vip), Type: lb.SVCTypeClusterIP}}})
		})
		a2.waitDone(t, 10*time.Second)
		mid := dumpText(t, maps2)
		a2.write(t, func(txn statedb.WriteTxn) error { return a2.w.SetBackends(txn, n, lb.SourceK8s, x) })
		a2.waitDone(t, 10*time.Second)
		if after := dumpText(t, maps2); after != before {
			t.Fatalf("before the source synced, the backend lost its ID:\n--- before restart\n%s--- after the service\n%s--- after its backends\n%s", before, mid, after)
		}
	})
}
