package reconciler_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	statedbreconciler "github.com/cilium/statedb/reconciler"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// waitSettled waits until settled reports nothing, and fails the test
// with what it reports at the deadline.
func (a *agent) waitSettled(t testing.TB, maps *bpf.Maps, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		v := a.settled(t, maps)
		if v == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not settled after %s: %s\n%s", timeout, v, dumpText(t, maps))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// settled reports what keeps the maps from being the documented outcome
// of the frontends table, "" when nothing does: every frontend is either
// reconciled, and in the maps whole, or waits for room it provably lacks
// (its need exceeds what is free in some map); the maps are consistent
// (checkMaps), hold no frontend the table lacks, and their entries are
// what lbstate_map_entries says. It assumes that every backend of a
// frontend has the same weight, so that each takes one slot.
func (a *agent) settled(t testing.TB, maps *bpf.Maps) string {
	if v := checkMaps(maps); v != "" {
		return v
	}
	d, err := bpf.TakeDump(maps)
	if err != nil {
		return err.Error()
	}
	masters := map[lb.L3n4Addr]bpf.ServiceEntry{}
	slots := map[lb.L3n4Addr][]uint32{}
	for _, e := range d.Services {
		if e.Slot == 0 {
			masters[e.Frontend] = e
		} else {
			slots[e.Frontend] = append(slots[e.Frontend], e.BackendID)
		}
	}
	backendAt := map[uint32]lb.L3n4Addr{}
	haveBackend := map[lb.L3n4Addr]bool{}
	for _, e := range d.Backends {
		backendAt[e.ID], haveBackend[e.L3n4Addr()] = e.L3n4Addr(), true
	}
	revNat, maglev := map[uint32]bool{}, map[uint32]bool{}
	for _, e := range d.RevNat {
		revNat[e.ID] = true
	}
	for _, e := range d.Maglev {
		maglev[e.RevNatID] = true
	}
	counts := map[string]int{
		maps.Services.Name(): d.ServiceEntries(), maps.Backends.Name(): len(d.Backends), maps.RevNat.Name(): len(d.RevNat),
		maps.Maglev.Name(): len(d.Maglev), maps.SourceRanges.Name(): len(d.SourceRanges),
	}
	free := func(name string) int {
		c, _ := maps.Capacity(name)
		return c.MaxEntries - counts[name]
	}

	inTable := map[lb.L3n4Addr]bool{}
	for fe := range a.frontends.All(a.db.ReadTxn()) {
		inTable[fe.Address] = true
		fallback := 0 // the hidden backends taking new flows, with skip-from-backend
		if fe.SkipFromBackend() {
			for _, b := range fe.Hidden() {
				fallback += b2i(b.Weight > 0)
			}
		}
		switch fe.Status.Kind {
		case statedbreconciler.StatusKindDone:
			m, ok := masters[fe.Address]
			if !ok {
				return fmt.Sprintf("%s is reconciled but has no master entry", fe.Address)
			}
			if n := int(m.Count) + int(m.Standby); n != len(fe.Backends) || int(m.Fallback) != fallback || len(slots[fe.Address]) != n+fallback {
				return fmt.Sprintf("%s is reconciled with %d backends and %d fallback ones, but its master counts %d slots and %d fallback, and %d exist",
					fe.Address, len(fe.Backends), fallback, n, m.Fallback, len(slots[fe.Address]))
			}
			for _, id := range slots[fe.Address] {
				if !hasBackend(fe, backendAt[id]) {
					return fmt.Sprintf("%s is reconciled, but a slot names backend %d (%s), not one of its own", fe.Address, id, backendAt[id])
				}
			}
		case statedbreconciler.StatusKindError:
			if !strings.Contains(fe.Status.GetError(), bpf.ErrMapFull.Error()) {
				return fmt.Sprintf("%s failed: %s", fe.Address, fe.Status.GetError())
			}
			need := map[string]int{
				maps.Services.Name(): max(0, len(fe.Backends)+fallback-len(slots[fe.Address])),
				maps.RevNat.Name():   b2i(!revNat[fe.ID]),
			}
			if _, ok := masters[fe.Address]; !ok {
				need[maps.Services.Name()]++
			}
			needed := map[lb.L3n4Addr]bool{} // selected and hidden: the reconciler keeps both
			for _, b := range slices.Concat(fe.Backends, fe.Hidden()) {
				if !haveBackend[b.Address] && !needed[b.Address] {
					needed[b.Address] = true
					need[maps.Backends.Name()]++
				}
			}
			if fe.Policy.Algorithm == lb.AlgorithmMaglev && len(fe.Backends) > 0 && fe.Backends[0].Weight > 0 {
				need[maps.Maglev.Name()] = b2i(!maglev[fe.ID])
			}
			fits := true
			for name, n := range need {
				fits = fits && n <= free(name)
			}
			if fits {
				return fmt.Sprintf("%s waits for room, but what it needs (%v) is free", fe.Address, need)
			}
		default:
			return fmt.Sprintf("%s is %s", fe.Address, fe.Status.Kind)
		}
	}
	for addr := range masters {
		if !inTable[addr] {
			return fmt.Sprintf("%s is in the maps, not in the table", addr)
		}
	}
	metrics := a.scrape(t)
	for name, n := range counts {
		if got := metricValue(metrics, "lbstate_map_entries", name); got != n {
			return fmt.Sprintf("%s holds %d entries, lbstate_map_entries says %d", name, n, got)
		}
	}
	return ""
}

func hasBackend(fe *lb.Frontend, addr lb.L3n4Addr) bool {
	for _, b := range slices.Concat(fe.Backends, fe.Hidden()) {
		if b.Address == addr {
			return true
		}
	}
	return false
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// metricValue returns the value of a metric with label map=name in a
// scrape, -1 if it is not there.
func metricValue(scrape, metric, name string) int {
	prefix := fmt.Sprintf("%s{map=%q} ", metric, name)
	for _, line := range strings.Split(scrape, "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return int(f)
			}
		}
	}
	return -1
}
