package reconciler_test

// Prune: once every source has synced, what the maps hold that no
// frontend claims is deleted.

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

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

// A failed prune is tried again within seconds, with backoff, as a failed
// frontend is. (Stale services once stayed in the maps, served by the
// datapath, until statedb's periodic prune 30 minutes later.)
func TestFailedPruneRetried(t *testing.T) {
	raw := memoryMaps(t)
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

// A prune that succeeds is not counted in
// lbstate_reconciler_prune_errors_total. (statedb reports every prune to
// Metrics.PruneError, with a nil error for a success, which was once
// counted as a failure.)
func TestSuccessfulPruneNotCountedAsError(t *testing.T) {
	maps := memoryMaps(t)
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

// watchedBackends records every lb_backends delete of an ID that an
// lb_services slot or a Maglev table still names.
type watchedBackends struct {
	bpf.Map[uint32, bpf.Backend]
	maps  *bpf.Maps
	named []string
}

func (w *watchedBackends) Delete(id uint32) error {
	w.check(id)
	return w.Map.Delete(id)
}

func (w *watchedBackends) BatchDelete(ids []uint32) error {
	for _, id := range ids {
		w.check(id)
	}
	return w.Map.BatchDelete(ids)
}

func (w *watchedBackends) check(id uint32) {
	w.maps.Services.Iterate(func(k bpf.ServiceKey, v bpf.ServiceValue) bool {
		if k.Slot > 0 && v.BackendID == id {
			w.named = append(w.named, fmt.Sprintf("backend %d deleted while slot %d of %s names it", id, k.Slot, k.L3n4Addr()))
		}
		return true
	})
	w.maps.Maglev.Iterate(func(rev uint32, table []uint32) bool {
		if slices.Contains(table, id) {
			w.named = append(w.named, fmt.Sprintf("backend %d deleted while Maglev table %d names it", id, rev))
		}
		return true
	})
}

// A prune deletes no backend while an entry it prunes still names it:
// slots and Maglev tables go first. (Slots left without a master entry,
// by a failed write before a restart, once outlived the restored backend
// they named.)
func TestPruneDeletesBackendsAfterWhatNamesThem(t *testing.T) {
	raw := memoryMaps(t)
	// Left by an earlier agent: frontend 10.96.13.1 with slots, but no
	// master entry (its write failed), naming backend 5, and an orphan
	// Maglev table naming it too.
	x := addr("10.13.0.1:8080/TCP")
	vip := addr("10.96.13.1:80/TCP")
	mustDo(t, raw.Backends.Update(5, bpf.NewBackend(lb.BackendRef{Address: x}, 0)))
	mustDo(t, raw.Services.Update(bpf.NewServiceKey(vip, bpf.InlineSlots+1), bpf.ServiceValue{BackendID: 5, RevNatID: 3}))
	mustDo(t, raw.Maglev.Update(3, slices.Repeat([]uint32{5}, raw.Maglev.TableSize())))
	maps := *raw
	watched := &watchedBackends{Map: raw.Backends, maps: raw}
	maps.Backends = watched

	a := newAgent(t, &maps, nil) // no source: the first prune comes at once
	a.start(t)
	defer a.stop(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok, _ := raw.Backends.Lookup(5); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stale backend was never pruned:\n%s", dumpText(t, raw))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(watched.named) > 0 {
		t.Fatal(strings.Join(watched.named, "\n"))
	}
}

func mustDo(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Slots left without a master entry lend their backends to no one: a
// frontend known only by its rev-NAT entry, restored beside them, holds
// no reference on the backend they name, which a prune then deletes.
// (Restore once dropped the state of such slots, and a rev-NAT-only
// frontend restored next took its place, and its references.)
func TestSlotsWithoutMasterGiveNoBackendToOthers(t *testing.T) {
	maps := memoryMaps(t)
	x := addr("10.13.0.1:8080/TCP")
	mustDo(t, maps.Backends.Update(5, bpf.NewBackend(lb.BackendRef{Address: x}, 0)))
	mustDo(t, maps.Services.Update(bpf.NewServiceKey(addr("10.96.13.1:80/TCP"), bpf.InlineSlots+1), bpf.ServiceValue{BackendID: 5, RevNatID: 3}))
	mustDo(t, maps.RevNat.Update(7, bpf.NewRevNatValue(addr("10.96.13.2:80/TCP"))))

	a := newAgent(t, maps, nil) // no source: the first prune comes at once
	a.start(t)
	defer a.stop(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok, _ := maps.Backends.Lookup(5); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the backend only stale slots named was never pruned:\n%s", dumpText(t, maps))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
