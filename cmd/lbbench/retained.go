package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"time"
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
// informer's store drops them on delete.
//
// After the delete-all one more service comes and goes: StateDB's
// graveyard keeps the last deleted frontends until its next collection,
// which a later deletion triggers; a live agent deletes all the time.
// The caller polls liveHeap for the figure after: the collection runs at
// most once a second.
func (b *bench) retained(services, backends int) (fresh uint64, err error) {
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
		return b.settle(0, 0)
	}
	if err := cycle(services, services+1); err != nil {
		return 0, err
	}
	fresh = liveHeap()
	if err := cycle(0, services); err != nil {
		return 0, err
	}
	return fresh, cycle(services, services+1)
}

// settledHeap polls liveHeap until it is at most bound or for wait, and
// returns the lowest figure seen.
func settledHeap(bound uint64, wait time.Duration) uint64 {
	low := liveHeap()
	for deadline := time.Now().Add(wait); low > bound && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		low = min(low, liveHeap())
	}
	return low
}

// runRetained is --memory-after-delete: the live heap of a fresh
// pipeline, and after services x backends came and went.
func runRetained(o options, out io.Writer) error {
	if o.memProfile != "" {
		runtime.MemProfileRate = 4096
	}
	b, err := newBench(o)
	if err != nil {
		return err
	}
	defer b.stop()
	start := time.Now()
	fresh, err := b.retained(o.services, o.backends)
	if err != nil {
		return err
	}
	after := settledHeap(fresh, 5*time.Second)
	if o.memProfile != "" { // what is left
		if f, err := os.Create(o.memProfile); err == nil {
			pprof.WriteHeapProfile(f)
			f.Close()
		}
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
