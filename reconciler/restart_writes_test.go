package reconciler_test

// A restart over the same declarations writes nothing: every entry is
// churn under live traffic, and the maps hold what would be written.

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// declareMixed declares n services of every shape the maps hold: random
// and Maglev, equal and unequal weights (weighted slots), a terminating
// backend (a standby slot), session affinity, a LoadBalancer frontend
// with source ranges, and backends shared between services.
func declareMixed(t *testing.T, a *agent, n int) {
	a.write(t, func(txn statedb.WriteTxn) error {
		for i := range n {
			name := lb.NewServiceName("test", fmt.Sprintf("mixed-%d", i))
			params := lb.ServiceParams{Name: name, Source: lb.SourceK8s, Algorithm: lb.AlgorithmRandom,
				Frontends: []lb.FrontendParams{{Address: lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{10, 97, byte(i >> 8), byte(i)}), 80, lb.ScopeExternal), Type: lb.SVCTypeClusterIP}}}
			if i%2 == 1 {
				params.Algorithm = lb.AlgorithmMaglev
			}
			if i%3 == 0 {
				params.SessionAffinity = true
			}
			if i%5 == 0 {
				params.Frontends = append(params.Frontends, lb.FrontendParams{
					Address: lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{203, 0, byte(i >> 8), byte(i)}), 443, lb.ScopeExternal), Type: lb.SVCTypeLoadBalancer})
				params.SourceRanges = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("198.51.100.0/24")}
			}
			if err := a.w.UpsertService(txn, params); err != nil {
				return err
			}
			var bes []lb.BackendParams
			for j := range 4 {
				b := lb.BackendParams{Address: lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{10, 2, byte(i), byte(j)}), 8080, lb.ScopeExternal), Weight: 100}
				if i%4 == 2 {
					b.Weight = uint16(100 * (j + 1)) // weighted slots
				}
				if j == 3 && i%7 == 0 {
					b.State = lb.BackendTerminating
				}
				bes = append(bes, b)
			}
			// Every service shares one backend with the next.
			bes = append(bes, lb.BackendParams{Address: lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{10, 3, byte((i + 1) / 2 >> 8), byte((i + 1) / 2)}), 8080, lb.ScopeExternal), Weight: 100})
			if err := a.w.SetBackends(txn, name, lb.SourceK8s, bes...); err != nil {
				return err
			}
		}
		return nil
	})
}

// writesTotal returns lbstate_map_writes_total by map, from a scrape.
func writesTotal(t *testing.T, scrape string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, line := range strings.Split(scrape, "\n") {
		if rest, ok := strings.CutPrefix(line, `lbstate_map_writes_total{map="`); ok {
			name, _, _ := strings.Cut(rest, `"`)
			out[name] = metricValue(scrape, "lbstate_map_writes_total", name)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no lbstate_map_writes_total in:\n%s", scrape)
	}
	return out
}

// waitPruned waits until the agent has pruned once.
func (a *agent) waitPruned(t *testing.T, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(a.scrape(t), "lbstate_reconciler_prune_duration_seconds_count 1") {
		if time.Now().After(deadline) {
			t.Fatalf("no prune in %s", timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A restarted agent whose sources declare what they declared before
// writes no entry at all, in any map, by the time it has synced and
// pruned: masters, slots, rev-NAT entries, Maglev tables and backends
// are compared with what the pinned maps hold (read once at restore),
// and every ID is kept. (Every restart once rewrote every master, slot,
// rev-NAT entry and Maglev table: 120,000 entries at 10,000 x 10.) The
// counter counts: a change after the restart shows up in it.
func TestRestartOverTheSameDeclarationsWritesNothing(t *testing.T) {
	onBothMapKinds(t, func(t *testing.T, maps *bpf.Maps, reopen func() *bpf.Maps) {
		const n = 300
		declare := func(a *agent) { declareMixed(t, a, n) }
		a2 := restartWritesNothing(t, maps, reopen, declare, func(a1 *agent, before string) {
			if !strings.Contains(before, "maglev ") || !strings.Contains(before, "192.0.2.0/24") || !strings.Contains(before, "affinity") {
				t.Fatalf("the maps lack a shape the test means to cover:\n%s", before)
			}
			if w := writesTotal(t, a1.scrape(t)); w["lb_services"] == 0 || w["lb_backends"] == 0 || w["lb_maglev"] == 0 {
				t.Fatalf("the first agent's writes were not counted: %v", w)
			}
		})

		// One backend's weight changes: its frontend's slots are written.
		a2.write(t, func(txn statedb.WriteTxn) error {
			return a2.w.SetBackends(txn, lb.NewServiceName("test", "mixed-0"), lb.SourceK8s,
				lb.BackendParams{Address: lb.MustParseL3n4Addr("10.2.0.0:8080/TCP"), Weight: 100})
		})
		a2.waitDone(t, 30*time.Second)
		if w := writesTotal(t, a2.scrape(t)); w["lb_services"] == 0 {
			t.Errorf("a change after the restart wrote no lb_services entry: %v", w)
		}
	})
}

// restartWritesNothing runs an agent over maps that declares what declare
// does, shows the maps it left to first, restarts over them (reopen) with
// a source that declares the same before it syncs, and checks that the
// restarted agent, synced and pruned, wrote no entry of any map, left
// the maps as they were and kept every frontend ID. It returns the
// restarted agent, stopped at the test's end.
func restartWritesNothing(t *testing.T, maps *bpf.Maps, reopen func() *bpf.Maps, declare func(*agent), first func(a1 *agent, before string)) *agent {
	t.Helper()
	a1 := newAgent(t, maps, nil)
	a1.start(t)
	declare(a1)
	a1.waitDone(t, 30*time.Second)
	before, ids := dumpText(t, maps), a1.frontendIDs()
	first(a1, before)

	a1.stop(t)
	if maps.Kind == "kernel" {
		maps.Close()
	}
	maps2 := reopen()
	a2 := newAgent(t, maps2, nil)
	done, err := a2.w.RegisterInitializer("test") // as a source does: nothing is pruned before it synced
	if err != nil {
		t.Fatal(err)
	}
	a2.start(t)
	t.Cleanup(func() { a2.stop(t) })
	declare(a2)
	a2.write(t, func(txn statedb.WriteTxn) error { done(txn); return nil })
	a2.waitDone(t, 30*time.Second)
	a2.waitPruned(t, 30*time.Second)

	for name, w := range writesTotal(t, a2.scrape(t)) {
		if w != 0 {
			t.Errorf("the restarted agent wrote %d entries of %s", w, name)
		}
	}
	if got := dumpText(t, maps2); got != before {
		t.Errorf("the maps changed across the restart:\n--- before\n%s--- after\n%s", before, got)
	}
	for addr, id := range a2.frontendIDs() {
		if ids[addr] != id {
			t.Errorf("frontend %s: ID %d after the restart, %d before", addr, id, ids[addr])
		}
	}
	return a2
}
