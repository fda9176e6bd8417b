package reconciler_test

// Restart: the pinned maps are read back at start, so that live flows keep
// their IDs, and nothing is pruned until every source has synced.

import (
	"bytes"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/internal/syncbuf"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// A restarted agent keeps the IDs live flows use: the maps never lose a
// desired entry across the restart, and entries of services that went
// away while the agent was down are pruned only once every source has
// synced.
func TestRestartKeepsIDsAndPrunesAfterSync(t *testing.T) {
	cfg := kernelMapsConfig(t)
	maps1 := bpftest.KernelMaps(t, cfg)
	a1 := newAgent(t, maps1, nil)
	a1.start(t)
	declare(t, a1, 0, 20, 3)
	a1.waitDone(t, 10*time.Second)
	before := dumpText(t, maps1)
	a1.stop(t)
	maps1.Close()

	// The new agent's source declares services 0..17 again, not 18 and 19.
	maps2 := bpftest.KernelMaps(t, cfg)
	a2 := newAgent(t, maps2, nil)
	done, err := a2.w.RegisterInitializer("k8s")
	if err != nil {
		t.Fatal(err)
	}

	// From the restart on, a checker reads the maps: every entry of the
	// services still declared stays exactly as it was.
	var keep []string
	for _, line := range splitLines(before) {
		if !isOfService(line, 18) && !isOfService(line, 19) {
			keep = append(keep, line)
		}
	}
	var missing atomic.Value
	stopChecking := bpftest.KeepChecking(func() {
		now := dumpText(t, maps2)
		for _, line := range keep {
			if !bytes.Contains([]byte(now), []byte(line+"\n")) {
				missing.Store(line)
			}
		}
	})

	a2.start(t)
	declare(t, a2, 0, 18, 3)
	a2.waitDone(t, 10*time.Second)
	if got := dumpText(t, maps2); got != before {
		t.Fatalf("before the sources synced, the maps changed:\n--- before restart\n%s--- now\n%s", before, got)
	}

	// The source finishes its sync: 18 and 19 are pruned, the rest stays.
	a2.write(t, func(txn statedb.WriteTxn) error { done(txn); return nil })
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := dumpText(t, maps2)
		if got == joinLines(keep) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stale entries not pruned:\n--- want\n%s--- got\n%s", joinLines(keep), got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopChecking()
	if line := missing.Load(); line != nil {
		t.Fatalf("entry missing during the restart: %s", line)
	}
	// New IDs continue after the restored ones.
	declare(t, a2, 100, 1, 1)
	a2.waitDone(t, 10*time.Second)
	fe, _, _ := a2.frontends.Get(a2.db.ReadTxn(), tables.FrontendByAddress.Query(frontendAddr(100)))
	if fe.ID <= 20 {
		t.Errorf("a new frontend got ID %d, which the restored frontends used", fe.ID)
	}
	a2.stop(t)
}

// isOfService reports whether a dump line belongs to service i's frontend
// (ID i+1, address 10.96.0.i) or its backends (10.1.i.*).
func isOfService(line string, i int) bool {
	for _, s := range []string{
		fmt.Sprintf("10.96.0.%d:80/TCP ", i), fmt.Sprintf("10.96.0.%d:80\n", i), fmt.Sprintf("10.1.%d.", i),
		fmt.Sprintf("maglev %d ", i+1),
	} {
		if bytes.Contains([]byte(line+"\n"), []byte(s)) {
			return true
		}
	}
	return false
}

func joinLines(lines []string) string {
	var sb bytes.Buffer
	for _, l := range lines {
		sb.WriteString(l + "\n")
	}
	return sb.String()
}

// restart stops a and starts a new agent over the maps reopen gives (its
// kernel maps closed first). With pendingSource, the new agent has a
// source that has yet to sync, so that nothing is pruned.
func restart(t *testing.T, a *agent, maps *bpf.Maps, reopen func() *bpf.Maps, pendingSource bool) (*agent, *bpf.Maps) {
	a.stop(t)
	if maps.Kind == "kernel" {
		maps.Close()
	}
	maps2 := reopen()
	a2 := newAgent(t, maps2, nil)
	if pendingSource {
		if _, err := a2.w.RegisterInitializer("k8s"); err != nil {
			t.Fatal(err)
		}
	}
	a2.start(t)
	return a2, maps2
}

// restartWithSharedBackend sets up services a and b sharing backend X,
// restarts the agent before its sources have synced, and declares b again
// without X. It returns the restarted agent and its maps.
func restartWithSharedBackend(t *testing.T, maps *bpf.Maps, reopen func() *bpf.Maps) (*agent, *bpf.Maps) {
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
	a2, maps2 := restart(t, a1, maps, reopen, true)
	a2.write(t, func(txn statedb.WriteTxn) error {
		return upsert(a2.w, txn, "b", "10.96.6.2:80/TCP", lb.AlgorithmRandom, false, y)
	})
	a2.waitDone(t, 10*time.Second)
	return a2, maps2
}

// A restored frontend that no source has declared yet holds references on
// the backends its slots name: another frontend dropping a shared backend
// does not delete it from under it. (b's update once took X's only
// reference and deleted it while a's restored slot still named it.)
func TestRestoredFrontendKeepsSharedBackend(t *testing.T) {
	onBothMapKinds(t, func(t *testing.T, maps *bpf.Maps, reopen func() *bpf.Maps) {
		a2, maps2 := restartWithSharedBackend(t, maps, reopen)
		defer a2.stop(t)
		if v := checkMaps(maps2); v != "" {
			t.Fatalf("after restart, b dropped the backend it shares with (restored) a: %s\n%s", v, dumpText(t, maps2))
		}
	})
}

// Declaring the restored frontend again, after another frontend dropped
// the backend they shared, adopts that backend. (Its adoption once found
// the backend in neither the live nor the restored state and the agent
// crashed on a nil pointer; the child process contains such a panic.)
func TestRestoredFrontendDeclaredAgainAdoptsSharedBackend(t *testing.T) {
	if os.Getenv("LBSTATE_TEST_CHILD") == "1" {
		maps := memoryMaps(t)
		a2, _ := restartWithSharedBackend(t, maps, func() *bpf.Maps { return maps })
		a2.write(t, func(txn statedb.WriteTxn) error {
			return upsert(a2.w, txn, "a", "10.96.6.1:80/TCP", lb.AlgorithmRandom, false, be("10.4.0.1:8080/TCP"))
		})
		a2.waitDone(t, 10*time.Second)
		a2.stop(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRestoredFrontendDeclaredAgainAdoptsSharedBackend$", "-test.count=1", "-test.timeout=60s")
	cmd.Env = append(os.Environ(), "LBSTATE_TEST_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		excerpt := out
		if i := bytes.Index(out, []byte("panic:")); i >= 0 {
			excerpt = out[i:min(len(out), i+1500)]
		}
		t.Fatalf("declaring the restored frontend again: %v\n%s", err, excerpt)
	}
}

// A restarted agent does not hand out a frontend ID that entries other
// than a master still carry (lb_rev_nat, lb_affinity, lb_maglev,
// lb_src_range, left by a delete that failed after removing the master, or
// by a crash in the middle of one) until a prune has deleted them. (Restore
// once reserved only the IDs of master entries: a new frontend inherited
// another's affinity entries, which sent its clients to a backend not its
// own.)
func TestRestartReservesIDsLeftInMaps(t *testing.T) {
	maps := memoryMaps(t)
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

// IDs released just before a restart are not handed out again soon after
// it: conntrack still carries them. (The allocator once restarted right
// after the highest ID still in the maps, and handed the released ones out
// at once; it now resumes from the mark it records.)
func TestRestartDoesNotReuseReleasedIDs(t *testing.T) {
	onBothMapKinds(t, func(t *testing.T, maps *bpf.Maps, reopen func() *bpf.Maps) {
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
			return a1.w.DeleteService(txn, lb.NewServiceName("test", "gone"), lb.SourceK8s)
		})
		a1.write(t, func(txn statedb.WriteTxn) error {
			return a1.w.ReleaseBackends(txn, lb.NewServiceName("test", "gone"), lb.SourceK8s, addr("10.7.0.2:8080/TCP"))
		})
		a1.waitDone(t, 10*time.Second)
		a2, maps2 := restart(t, a1, maps, reopen, false)
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

// Before the sources have synced, a restored frontend declared without its
// backends (a source may send a service and its backends in separate
// transactions) keeps them parked, with their IDs, until they come: the
// maps end as they were before the restart. (The first update once wrote
// count=0 and deleted the restored backend, which came back under a new
// ID and broke the flows conntrack held with the old one.)
func TestRestartKeepsBackendIDUntilBackendsDeclared(t *testing.T) {
	onBothMapKinds(t, func(t *testing.T, maps *bpf.Maps, reopen func() *bpf.Maps) {
		vip := "10.96.11.1:80/TCP"
		x := be("10.9.0.1:8080/TCP")
		a1 := newAgent(t, maps, nil)
		a1.start(t)
		a1.write(t, func(txn statedb.WriteTxn) error {
			return upsert(a1.w, txn, "web", vip, lb.AlgorithmRandom, false, x)
		})
		a1.waitDone(t, 10*time.Second)
		before := dumpText(t, maps)
		a2, maps2 := restart(t, a1, maps, reopen, true)
		defer a2.stop(t)
		n := lb.NewServiceName("test", "web")
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

// The log line of a restart counts what it restored: every frontend and
// every backend ID. (It once said backends=0 when 14 backend IDs were
// restored: it counted the backends no frontend had claimed yet.)
func TestRestartLogCountsRestoredIDs(t *testing.T) {
	onBothMapKinds(t, func(t *testing.T, maps *bpf.Maps, reopen func() *bpf.Maps) {
		a1 := newAgent(t, maps, nil)
		a1.start(t)
		declare(t, a1, 0, 4, 3)
		a1.waitDone(t, 10*time.Second)
		a1.stop(t)
		if maps.Kind == "kernel" {
			maps.Close()
		}
		var buf syncbuf.Buffer
		a2 := newAgentLogging(t, reopen(), nil, slog.New(slog.NewTextHandler(&buf, nil)))
		a2.start(t)
		a2.stop(t)
		want := `msg="Restored IDs from pinned maps" module=lb-reconciler frontends=4 backends=12`
		if !strings.Contains(buf.String(), want) {
			t.Fatalf("the log lacks %q:\n%s", want, buf.String())
		}
	})
}

// When --lb-recreate-maps recreates lb_services (its layout changed),
// every frontend keeps its rev-NAT ID, read back from lb_rev_nat, which
// was kept: established flows' replies are still rewritten, and the maps
// end as they were. (The IDs were once renumbered, 1-13 becoming
// 1025-1037.)
func TestRecreatedServicesMapKeepsFrontendIDs(t *testing.T) {
	cfg := kernelMapsConfig(t)
	maps1 := bpftest.KernelMaps(t, cfg)
	a1 := newAgent(t, maps1, nil)
	a1.start(t)
	declare(t, a1, 0, 13, 2)
	a1.waitDone(t, 10*time.Second)
	before, ids := dumpText(t, maps1), a1.frontendIDs()
	a1.stop(t)
	maps1.Close()

	bpftest.PinIncompatibleMap(t, cfg.LBPinDir, "lb_services")
	cfg.LBRecreateMaps = true
	maps2 := bpftest.KernelMaps(t, cfg)
	if len(maps2.Recreated) != 1 || maps2.Recreated[0].Name != "lb_services" {
		t.Fatalf("recreated %v, want lb_services alone", maps2.Recreated)
	}
	a2 := newAgent(t, maps2, nil)
	done, err := a2.w.RegisterInitializer("k8s") // as a source does: nothing is pruned before it syncs
	if err != nil {
		t.Fatal(err)
	}
	a2.start(t)
	defer a2.stop(t)
	declare(t, a2, 0, 13, 2)
	a2.write(t, func(txn statedb.WriteTxn) error { done(txn); return nil })
	a2.waitDone(t, 10*time.Second)
	if got := a2.frontendIDs(); !maps.Equal(got, ids) {
		t.Errorf("frontend IDs changed:\n before %v\n after  %v", ids, got)
	}
	if after := dumpText(t, maps2); after != before {
		t.Errorf("the maps differ:\n--- before\n%s--- after\n%s", before, after)
	}
}

// frontendIDs returns every frontend's ID by address.
func (a *agent) frontendIDs() map[lb.L3n4Addr]uint32 {
	ids := map[lb.L3n4Addr]uint32{}
	for fe := range a.frontends.All(a.db.ReadTxn()) {
		ids[fe.Address] = fe.ID
	}
	return ids
}

// lb_rev_nat is a dense ID map (slot = ID % max_entries): when a changed
// --lb-rev-nat-max has it recreated, the frontends restored from
// lb_services keep their IDs where the new slots allow, and of two whose
// IDs now share a slot one keeps its ID and the other takes a new one
// (above every ID handed out before); every frontend is served and no two
// IDs share a slot.
func TestResizedRevNatMapKeepsTheIDsThatStillFit(t *testing.T) {
	cfg := kernelMapsConfig(t)
	cfg.LBRevNatMax = 16
	maps1 := bpftest.KernelMaps(t, cfg)
	a1 := newAgent(t, maps1, nil)
	a1.start(t)
	a1.write(t, func(txn statedb.WriteTxn) error {
		for i := range 13 {
			if err := declareFull(a1, txn, i, 1); err != nil {
				return err
			}
		}
		return nil
	})
	a1.waitDone(t, 10*time.Second)
	// Keep IDs 1, 2, 10..13: under 8 slots, 2 and 10 share slot 2.
	a1.write(t, func(txn statedb.WriteTxn) error {
		for i := range 13 {
			if id := a1.frontendID(fullVIP(i)); id >= 3 && id <= 9 {
				if err := a1.w.DeleteService(txn, lb.NewServiceName("test", fmt.Sprintf("full-%d", i)), lb.SourceK8s); err != nil {
					return err
				}
			}
		}
		return nil
	})
	a1.waitDone(t, 10*time.Second)
	before := a1.frontendIDs()
	a1.stop(t)
	maps1.Close()

	cfg.LBRevNatMax, cfg.LBRecreateMaps = 8, true
	maps2 := bpftest.KernelMaps(t, cfg)
	if len(maps2.Recreated) != 1 || maps2.Recreated[0].Name != "lb_rev_nat" {
		t.Fatalf("recreated %v, want lb_rev_nat alone", maps2.Recreated)
	}
	a2 := newAgent(t, maps2, nil)
	done, err := a2.w.RegisterInitializer("k8s")
	if err != nil {
		t.Fatal(err)
	}
	a2.start(t)
	defer a2.stop(t)
	a2.write(t, func(txn statedb.WriteTxn) error {
		for i := range 13 {
			if _, ok := before[lb.MustParseL3n4Addr(fullVIP(i))]; ok {
				if err := declareFull(a2, txn, i, 1); err != nil {
					return err
				}
			}
		}
		done(txn)
		return nil
	})
	a2.waitDone(t, 10*time.Second)
	after := a2.frontendIDs()
	kept, renumbered := 0, 0
	slots := map[uint32]lb.L3n4Addr{}
	for addr, id := range after {
		if other, ok := slots[id%8]; ok {
			t.Errorf("%s (ID %d) and %s (ID %d) share slot %d", addr, id, other, after[other], id%8)
		}
		slots[id%8] = addr
		switch old := before[addr]; {
		case id == old:
			kept++
		case id > 13 && (old == 2 || old == 10):
			renumbered++
		default:
			t.Errorf("%s: ID %d became %d", addr, old, id)
		}
	}
	if len(after) != 6 || kept != 5 || renumbered != 1 {
		t.Errorf("%d frontends, %d kept their IDs, %d took new ones; want 6, 5, 1:\n before %v\n after  %v", len(after), kept, renumbered, before, after)
	}
	if v := checkMaps(maps2); v != "" {
		t.Fatalf("%s\n%s", v, dumpText(t, maps2))
	}
}
