package reconciler_test

// Restarts that hand out again the IDs freed before them.

import (
	"errors"
	"fmt"
	gomaps "maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reconciler"
)

// Restarts whose allocators lost their marks (lb_id_marks recreated, or
// pinned by an agent that kept none) hand the IDs freed just before them
// to new backends and frontends, while the maps still hold what restore,
// parking and prune must keep apart: restored frontends no source has
// declared again, parked backends, entries pruned after the sync. Under
// churn before and after each sync, a reader never sees a slot or Maglev
// table naming a backend absent from lb_backends, and at every rest the
// maps hold, strictly (one snapshot, no second look), every slot's and
// every table's backend, each of them one of its frontend's own. (The
// soak test once saw "slot 2 names backend 6, which is not in
// lb_backends" after a restart; this is the targeted look at IDs coming
// back that it called for.)
func TestRestartsWithReusedIDsUnderChurnKeepEverySlotsBackend(t *testing.T) {
	const cycles, stepsBefore, stepsAfter = 8, 40, 20
	cfg := kernelMapsConfig(t)
	cfg.LBBackendsMax = 32 // dense: reused and live IDs collide in slots

	maps := bpftest.KernelMaps(t, cfg)
	var current atomic.Pointer[bpf.Maps]
	current.Store(maps)
	violations := make(chan string, 1)
	startChecking := func() func() {
		return bpftest.KeepChecking(func() {
			if v := checkMaps(current.Load()); v != "" {
				select {
				case violations <- v:
				default:
				}
			}
		})
	}
	stopChecking := startChecking()
	defer func() { stopChecking() }()
	var order *writeOrder
	noViolation := func(when string) {
		t.Helper()
		select {
		case v := <-violations:
			t.Fatalf("%s: the datapath could have seen a half-written service: %s\n%s", when, v, dumpText(t, current.Load()))
		default:
		}
		if v := order.violations(); len(v) > 0 {
			t.Fatalf("%s: the writes, in the order made, broke what a datapath relies on: %v\n%s", when, v, dumpText(t, current.Load()))
		}
	}

	var written *bpf.Maps
	written, order = checkWriteOrder(maps)
	a := newAgent(t, written, nil)
	a.start(t)
	defer func() { a.stop(t) }()
	r := rand.New(rand.NewPCG(28, 12))
	model := soakModel{}
	seen := backendIDHistory{}
	reused := 0
	see := func() { reused += len(seen.see(t, current.Load())) }
	for cycle := 1; cycle <= cycles; cycle++ {
		for range stepsBefore {
			soakStep(t, a, r, model)
		}
		a.waitSettled(t, maps, time.Minute)
		strictlyWhole(t, a, maps, model, fmt.Sprintf("cycle %d, before the restart", cycle))
		noViolation(fmt.Sprintf("cycle %d", cycle))
		see()
		// The newest IDs, freed just before the restart: a service of
		// three backends of its own comes and goes.
		extra := soakModel{soakServices: {soakPool, soakPool + 1, soakPool + 2}}
		a.write(t, func(txn statedb.WriteTxn) error { return extra.declare(a.w, txn, soakServices) })
		a.waitSettled(t, maps, time.Minute)
		see()
		a.write(t, func(txn statedb.WriteTxn) error {
			return a.w.DeleteService(txn, soakName(soakServices), lb.SourceK8s)
		})
		a.waitSettled(t, maps, time.Minute)

		// Restart without the marks: the allocators resume after the
		// highest ID the maps hold.
		stopChecking()
		a.stop(t)
		mustDo(t, maps.IDMarks.Update(bpf.IDMarkFrontend, 0))
		mustDo(t, maps.IDMarks.Update(bpf.IDMarkBackend, 0))
		maps.Close()
		maps = bpftest.KernelMaps(t, cfg)
		current.Store(maps)
		stopChecking = startChecking()
		written, order = checkWriteOrder(maps)
		a = newAgent(t, written, nil)
		done, err := a.w.RegisterInitializer("k8s")
		if err != nil {
			t.Fatal(err)
		}
		a.start(t)

		// Before the sync: half the services come back, and churn goes
		// on (backends parked, restored ones adopted, new IDs handed out).
		declared := map[int]bool{}
		a.write(t, func(txn statedb.WriteTxn) error {
			for _, i := range slices.Sorted(gomaps.Keys(model)) {
				if r.IntN(2) == 0 {
					declared[i] = true
					if err := model.declare(a.w, txn, i); err != nil {
						return err
					}
				}
			}
			return nil
		})
		for range stepsAfter {
			i := soakStep(t, a, r, model)
			declared[i] = true
		}
		a.waitDone(t, time.Minute)
		strictlyWhole(t, a, maps, model, fmt.Sprintf("cycle %d, before the sync", cycle))
		noViolation(fmt.Sprintf("cycle %d, before the sync", cycle))

		// The sync: the rest comes back, and the prune deletes what
		// nobody claimed.
		a.write(t, func(txn statedb.WriteTxn) error {
			for _, i := range slices.Sorted(gomaps.Keys(model)) {
				if !declared[i] {
					if err := model.declare(a.w, txn, i); err != nil {
						return err
					}
				}
			}
			done(txn)
			return nil
		})
		for range stepsAfter {
			soakStep(t, a, r, model)
		}
		a.waitSettled(t, maps, time.Minute)
		strictlyWhole(t, a, maps, model, fmt.Sprintf("cycle %d, after the sync", cycle))
		noViolation(fmt.Sprintf("cycle %d, after the restart", cycle))
		see()
	}
	t.Logf("%d cycles, %d backend IDs handed to another backend across a restart", cycles, reused)
	if reused == 0 {
		t.Fatal("no backend ID was handed out again across a restart: the test tests nothing")
	}
}

// backendIDHistory is every backend ID seen in lb_backends at rest, with
// the address it had.
type backendIDHistory map[uint32]string

// see records the backend IDs lb_backends holds, and returns those that
// another backend had when last seen ("ID: was -> now").
func (h backendIDHistory) see(t *testing.T, maps *bpf.Maps) (handedOn []string) {
	t.Helper()
	d, err := bpf.TakeDump(maps)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range d.Backends {
		addr := e.L3n4Addr().String()
		if was, ok := h[e.ID]; ok && was != addr {
			handedOn = append(handedOn, fmt.Sprintf("%d: %s -> %s", e.ID, was, addr))
		}
		h[e.ID] = addr
	}
	return handedOn
}

// strictlyWhole checks one snapshot of the maps, taken at rest: every
// slot and every Maglev table names a backend lb_backends holds, one of
// its frontend's own in the model when the frontend is the model's (a
// restored one not declared again keeps the backends its slots named,
// which lb_backends must still hold).
func strictlyWhole(t *testing.T, a *agent, maps *bpf.Maps, model soakModel, when string) {
	t.Helper()
	d, err := bpf.TakeDump(maps)
	if err != nil {
		t.Fatal(err)
	}
	at := map[uint32]string{}
	for _, e := range d.Backends {
		at[e.ID] = e.L3n4Addr().String()
	}
	own := map[string]map[string]bool{} // by VIP, from the model
	for i, bes := range model {
		own[soakVIP(i)] = map[string]bool{}
		for _, b := range bes {
			own[soakVIP(i)][soakBackend(b).String()] = true
		}
	}
	ids := a.frontendIDs()
	vipOf := map[uint32]string{}
	for fe, id := range ids {
		vipOf[id] = fe.String()
	}
	check := func(what, vip string, id uint32) {
		addr, ok := at[id]
		switch {
		case !ok:
			t.Fatalf("%s: %s names backend %d, which is not in lb_backends\n%s", when, what, id, dumpText(t, maps))
		case own[vip] != nil && !own[vip][addr] && isReconciled(a, vip):
			t.Fatalf("%s: %s names backend %d (%s), not one of %s's own\n%s", when, what, id, addr, vip, dumpText(t, maps))
		}
	}
	for _, e := range d.Services {
		if e.Slot > 0 {
			check(fmt.Sprintf("slot %d of %s", e.Slot, e.Frontend), e.Frontend.String(), e.BackendID)
		}
	}
	for _, e := range d.Maglev {
		for id := range e.Slots {
			check(fmt.Sprintf("Maglev table %d", e.RevNatID), vipOf[e.RevNatID], id)
		}
	}
}

// isReconciled reports whether the frontend at vip is in the table and
// reconciled: its entries are then exactly its own.
func isReconciled(a *agent, vip string) bool {
	done, _ := a.statuses()
	return slices.Contains(done, vip)
}

// Two lb_backends entries with one address (a backend whose delete
// failed, handed a new ID by a frontend that took its address back,
// before a restart): the restored frontend keeps the very ID its slots
// name, and nothing its slots name is deleted from under them, through
// the sync and the prune, on both orders of the IDs.
func TestRestoreOfTwoIDsForOneBackendKeepsTheOneSlotsName(t *testing.T) {
	for _, named := range []uint32{5, 9} {
		t.Run(fmt.Sprintf("slots name %d", named), func(t *testing.T) {
			raw := memoryMaps(t)
			x := addr("10.16.0.1:8080/TCP")
			vip := addr("10.96.16.1:80/TCP")
			mustDo(t, raw.Backends.Update(5, bpf.NewBackend(lb.BackendRef{Address: x, Weight: 100}, 0)))
			mustDo(t, raw.Backends.Update(9, bpf.NewBackend(lb.BackendRef{Address: x, Weight: 100}, 0)))
			mustDo(t, bpf.WriteService(raw.Services, vip, bpf.ServiceValue{RevNatID: 3,
				ServiceMaster: bpf.ServiceMaster{Count: 1, Type: uint8(lb.SVCTypeClusterIP), Algorithm: bpf.AlgorithmRandom}}, []uint32{named}))
			mustDo(t, raw.RevNat.Update(3, bpf.NewRevNatValue(vip)))

			maps, order := checkWriteOrder(raw)
			a := newAgent(t, maps, nil)
			done, err := a.w.RegisterInitializer("k8s")
			if err != nil {
				t.Fatal(err)
			}
			a.start(t)
			defer a.stop(t)
			a.write(t, func(txn statedb.WriteTxn) error {
				if err := upsert(a.w, txn, "web", vip.String(), lb.AlgorithmRandom, false, be(x.String())); err != nil {
					return err
				}
				done(txn)
				return nil
			})
			a.waitSettled(t, raw, 10*time.Second)
			if v := order.violations(); len(v) > 0 {
				t.Fatalf("%v\n%s", v, dumpText(t, raw))
			}
			d := dumpText(t, raw)
			for _, want := range []string{fmt.Sprintf("backend %d %s active\n", named, x), fmt.Sprintf("slot=1 backend=%d\n", named)} {
				if !strings.Contains(d, want) {
					t.Errorf("the maps lack %q: the frontend's flows lost their backend ID\n%s", want, d)
				}
			}
			if got := (backendIDHistory{}); len(got.see(t, raw)) > 0 || len(got) != 1 {
				t.Errorf("lb_backends holds %d entries, want 1\n%s", len(got), d)
			}
		})
	}
}

// failingServiceWrites fails every write of lb_services while armed.
type failingServiceWrites struct {
	bpf.Map[bpf.ServiceKey, bpf.ServiceValue]
	armed atomic.Bool
}

func (m *failingServiceWrites) Update(k bpf.ServiceKey, v bpf.ServiceValue) error {
	if m.armed.Load() {
		return errors.New("injected lb_services write failure")
	}
	return m.Map.Update(k, v)
}

func (m *failingServiceWrites) BatchUpdate(ks []bpf.ServiceKey, vs []bpf.ServiceValue) error {
	if m.armed.Load() && len(ks) > 0 {
		return errors.New("injected lb_services write failure")
	}
	return m.Map.BatchUpdate(ks, vs)
}

// Of two lb_backends IDs for one address that two frontends' slots
// name, restore keeps one and the other frontend's update rewrites its
// slots to it; while that update fails, the slots still name the other
// ID, and the prune keeps that ID's entry (and the ID) until they are
// rewritten, then deletes it. (The first prune once deleted it at once,
// leaving the frontend's slots naming a backend that was gone.)
func TestDroppedBackendIDStaysWhileASlotNamesIt(t *testing.T) {
	defer reconciler.SetRetryMinBackoff(20 * time.Millisecond)()
	raw := memoryMaps(t)
	x := addr("10.19.0.1:8080/TCP")
	vips := []lb.L3n4Addr{addr("10.96.19.1:80/TCP"), addr("10.96.19.2:80/TCP")}
	twoIDsOfOneAddress(t, raw, x, vips, 5, 9)

	ordered, order := checkWriteOrder(raw)
	maps, failing := failingServices(ordered)
	a := newAgent(t, maps, nil)
	a.startWithTwoIDs(t, x, vips, nil)
	// One frontend's slot names the ID restore dropped, and its update
	// fails: both entries stay.
	for _, id := range []uint32{5, 9} {
		if _, ok, _ := raw.Backends.Lookup(id); !ok {
			t.Fatalf("the prune deleted backend %d, which a slot still names:\n%s", id, dumpText(t, raw))
		}
	}

	failing.armed.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, failed := a.statuses()
		n := 0
		raw.Backends.Iterate(func(uint32, bpf.Backend) bool { n++; return true })
		if len(failed) == 0 && n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rewritten slot's old backend ID was never pruned (failed: %v):\n%s", failed, dumpText(t, raw))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if v := order.violations(); len(v) > 0 {
		t.Fatalf("%v\n%s", v, dumpText(t, raw))
	}
	if d := dumpText(t, raw); strings.Count(d, "slot=1 backend=5\n") != 2 && strings.Count(d, "slot=1 backend=9\n") != 2 {
		t.Fatalf("the two frontends' slots do not both name the backend's one ID left:\n%s", d)
	}
}

// While a slot names a backend ID restore dropped, what is left to do is
// to delete that ID's entry once no slot names it: the retries look at
// those IDs alone, not at every map. (They once asked for full prunes,
// with backoff up to a minute, until the slot was rewritten: ~2 s of CPU
// each at 100,000 services x 10 backends.)
func TestDroppedBackendIDRetriesPruneNothingElse(t *testing.T) {
	var checks atomic.Int32
	defer reconciler.OnDroppedCheck(func() { checks.Add(1) })()
	raw := memoryMaps(t)
	x := addr("10.20.0.1:8080/TCP")
	vips := []lb.L3n4Addr{addr("10.96.20.1:80/TCP"), addr("10.96.20.2:80/TCP")}
	twoIDsOfOneAddress(t, raw, x, vips, 5, 9)
	maps, failing := failingServices(raw)
	a := newAgent(t, maps, nil)
	a.startWithTwoIDs(t, x, vips, nil)
	deadline := time.Now().Add(20 * time.Second)
	for checks.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d looks at the dropped backend ID in 20 s, want 3", checks.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(a.scrape(t), "lbstate_reconciler_prune_duration_seconds_count 1\n") {
		t.Errorf("the retries pruned every map again:\n%s", a.scrape(t))
	}
	for _, id := range []uint32{5, 9} {
		if _, ok, _ := raw.Backends.Lookup(id); !ok {
			t.Fatalf("backend %d is gone while a slot names it:\n%s", id, dumpText(t, raw))
		}
	}
	failing.armed.Store(false)
	for {
		n := 0
		raw.Backends.Iterate(func(uint32, bpf.Backend) bool { n++; return true })
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rewritten slot's old backend ID was never deleted:\n%s", dumpText(t, raw))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// twoIDsOfOneAddress writes into raw what an earlier agent could leave:
// backend x under two lb_backends IDs, ids[i] named by the one slot of a
// ClusterIP frontend at vips[i] (rev-NAT ID 3+i). Restore keeps one of
// the IDs and drops the other.
func twoIDsOfOneAddress(t *testing.T, raw *bpf.Maps, x lb.L3n4Addr, vips []lb.L3n4Addr, ids ...uint32) {
	t.Helper()
	for i, id := range ids {
		rev := uint32(3 + i)
		mustDo(t, raw.Backends.Update(id, bpf.NewBackend(lb.BackendRef{Address: x, Weight: 100}, 0)))
		mustDo(t, bpf.WriteService(raw.Services, vips[i], bpf.ServiceValue{RevNatID: rev,
			ServiceMaster: bpf.ServiceMaster{Count: 1, Type: uint8(lb.SVCTypeClusterIP), Algorithm: bpf.AlgorithmRandom}}, []uint32{id}))
		mustDo(t, raw.RevNat.Update(rev, bpf.NewRevNatValue(vips[i])))
	}
}

// failingServices returns maps over base whose lb_services writes fail
// while failing is armed (it is, on return).
func failingServices(base *bpf.Maps) (maps *bpf.Maps, failing *failingServiceWrites) {
	m := *base
	failing = &failingServiceWrites{Map: base.Services}
	failing.armed.Store(true)
	m.Services = failing
	return &m, failing
}

// startWithTwoIDs starts the agent (stopped at the test's end) with a
// source that declares web-i at vips[i] with the one backend x (the
// frontends twoIDsOfOneAddress seeded), and what more writes, as its
// initial state, and waits for the first prune.
func (a *agent) startWithTwoIDs(t *testing.T, x lb.L3n4Addr, vips []lb.L3n4Addr, more func(statedb.WriteTxn) error) {
	t.Helper()
	done, err := a.w.RegisterInitializer("k8s")
	if err != nil {
		t.Fatal(err)
	}
	a.start(t)
	t.Cleanup(func() { a.stop(t) })
	a.write(t, func(txn statedb.WriteTxn) error {
		for i, vip := range vips {
			if err := upsert(a.w, txn, fmt.Sprintf("web-%d", i), vip.String(), lb.AlgorithmRandom, false, be(x.String())); err != nil {
				return err
			}
		}
		if more != nil {
			if err := more(txn); err != nil {
				return err
			}
		}
		done(txn)
		return nil
	})
	a.waitPruned(t, 10*time.Second)
}
