package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"runtime"
	"sync"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
)

// Memory after a delete-all: everything a pipeline held for its services
// must go when they do (issue 28's probe found 271 MB kept after
// 100,000 x 10 came and went; a fresh agent holds 4.7 MB).

// liveHeap is the heap in use after the collector ran: what is reachable.
func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC() // a second round finalizes what cleanups freed
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// retained loads services x backends into b, deletes them all, and
// returns the live heap before (fresh) and after. Fresh is measured once
// one service came and went, so that what the first service allocates
// counts on both sides. The objects are made as pushed and not kept, as an
// informer's store drops them on delete. Each figure is taken once the
// pipeline is idle: StateDB collected its graveyards (g) and what it
// kept of the tables' past was released (idle).
func (b *bench) retained(services, backends int, g *graveyards, atFresh func()) (fresh, after uint64, err error) {
	cycle := func(from, to int) error {
		for i := from; i < to; i++ {
			svc, es := objects(i, backends, 0)
			b.refl.Push(svc, false)
			b.refl.Push(es, false)
		}
		if err := b.settle(to-from, (to-from)*backends); err != nil {
			return err
		}
		for i := from; i < to; i++ {
			svc, es := objects(i, backends, 0)
			b.refl.Push(es, true)
			b.refl.Push(svc, true)
		}
		if err := b.settle(0, 0); err != nil {
			return err
		}
		return b.idle(g)
	}
	if err := cycle(services, services+1); err != nil {
		return 0, 0, err
	}
	fresh = liveHeap()
	if atFresh != nil {
		atFresh()
	}
	if err := cycle(0, services); err != nil {
		return 0, 0, err
	}
	return fresh, liveHeap(), nil
}

// idle waits until every change iterator saw the deletions and StateDB
// collected them (its graveyards are empty), then releases what StateDB
// keeps of the tables as they were before (tables.Writer.ReleaseDeleted),
// as the tables' Cell does on its own a few seconds after deletions.
func (b *bench) idle(g *graveyards) error {
	deadline := time.Now().Add(time.Minute)
	for !g.empty() {
		if time.Now().After(deadline) {
			return fmt.Errorf("StateDB's graveyards still hold %v deleted rows after a minute", g.counts())
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.w.ReleaseDeleted()
	return nil
}

// graveyards records how many deleted rows each StateDB table holds for
// its change iterators (statedb.Metrics, which StateDB tells at every
// commit and after every collection).
type graveyards struct {
	mu      sync.Mutex
	deleted map[string]int
}

func newGraveyards() *graveyards { return &graveyards{deleted: map[string]int{}} }

func (g *graveyards) empty() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, n := range g.deleted {
		if n > 0 {
			return false
		}
	}
	return true
}

func (g *graveyards) counts() map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.deleted)
}

func (g *graveyards) GraveyardObjectCount(table string, n int) {
	g.mu.Lock()
	g.deleted[table] = n
	g.mu.Unlock()
}

func (*graveyards) WriteTxnTableAcquisition(string, string, time.Duration)   {}
func (*graveyards) WriteTxnTotalAcquisition(string, []string, time.Duration) {}
func (*graveyards) WriteTxnDuration(string, []string, time.Duration)         {}
func (*graveyards) GraveyardLowWatermark(string, statedb.Revision)           {}
func (*graveyards) GraveyardCleaningDuration(string, time.Duration)          {}
func (*graveyards) ObjectCount(string, int)                                  {}
func (*graveyards) DeleteTrackerCount(string, int)                           {}
func (*graveyards) Revision(string, statedb.Revision)                        {}

// graveyardCell gives g to StateDB as its metrics.
func graveyardCell(g *graveyards) cell.Cell {
	return cell.Provide(func() statedb.Metrics { return g })
}

// runRetained is --memory-after-delete: the live heap of a fresh
// pipeline, and after services x backends came and went.
func runRetained(o options, out io.Writer) error {
	if o.memProfile != "" {
		runtime.MemProfileRate = 4096
	}
	g := newGraveyards()
	o.cells = append(o.cells, graveyardCell(g))
	b, err := newBench(o)
	if err != nil {
		return err
	}
	defer b.stop()
	start := time.Now()
	var atFresh func()
	if o.memProfile != "" { // FILE.fresh, for pprof -base
		atFresh = func() { writeHeapProfile(o.memProfile + ".fresh") }
	}
	fresh, after, err := b.retained(o.services, o.backends, g, atFresh)
	if err != nil {
		return err
	}
	if o.memProfile != "" { // what is left
		writeHeapProfile(o.memProfile)
	}
	res := struct {
		Maps     string  `json:"maps"`
		Services int     `json:"services"`
		Backends int     `json:"backends_per_service"`
		FreshMB  float64 `json:"fresh_heap_mb"`
		AfterMB  float64 `json:"heap_after_delete_all_mb"`
		Seconds  float64 `json:"seconds"`
	}{b.maps.Kind, o.services, o.backends, float64(fresh) / 1e6, float64(after) / 1e6, time.Since(start).Seconds()}
	fmt.Fprintf(out, "lbbench: %d services x %d backends on %s maps came and went in %.1fs: live heap %.1f MB fresh, %.1f MB after (%+.1f MB)\n",
		res.Services, res.Backends, res.Maps, res.Seconds, res.FreshMB, res.AfterMB, res.AfterMB-res.FreshMB)
	if o.json {
		js, _ := json.Marshal(res)
		fmt.Fprintln(out, string(js))
	}
	return nil
}
