package reconciler

import (
	"context"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// BenchmarkUpdateDelete measures writing one new frontend with one backend
// into the maps and deleting it again: the reconciler's cost per service,
// on in-memory maps (its own work) and on kernel maps (with the
// syscalls).
func BenchmarkUpdateDelete(b *testing.B) {
	for _, kind := range []string{"memory", "kernel"} {
		b.Run(kind, func(b *testing.B) {
			benchUpdateDelete(b, benchMaps(b, kind), 1, 1)
		})
	}
}

// BenchmarkUpdateDeleteBatch is BenchmarkUpdateDelete in batches of 100
// frontends, as statedb's reconciler hands them over under load (ns/op is
// per frontend).
func BenchmarkUpdateDeleteBatch(b *testing.B) {
	for _, kind := range []string{"memory", "kernel"} {
		b.Run(kind, func(b *testing.B) {
			benchUpdateDelete(b, benchMaps(b, kind), 100, 1)
		})
	}
}

// BenchmarkUpdateDeleteBatch10Backends is BenchmarkUpdateDeleteBatch with
// 10 backends per frontend (ns/op is per frontend).
func BenchmarkUpdateDeleteBatch10Backends(b *testing.B) {
	for _, kind := range []string{"memory", "kernel"} {
		b.Run(kind, func(b *testing.B) {
			benchUpdateDelete(b, benchMaps(b, kind), 100, 10)
		})
	}
}

func benchMaps(b *testing.B, kind string) *bpf.Maps {
	cfg := bpf.DefaultConfig
	cfg.LBServicesMax, cfg.LBBackendsMax, cfg.LBRevNatMax = 1<<20, 1<<20, 1<<17
	if kind == "kernel" {
		cfg.LBPinDir = bpftest.Config(b).LBPinDir
		return bpftest.KernelMaps(b, cfg)
	}
	maps, err := bpf.NewMemoryMaps(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	return maps
}

func benchUpdateDelete(b *testing.B, maps *bpf.Maps, batchSize, backends int) {
	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		b.Fatal(err)
	}
	s, err := DefaultConfig.settings()
	if err != nil {
		b.Fatal(err)
	}
	o, err := newOps(maps, s, slog.New(slog.DiscardHandler), w.Frontends())
	if err != nil {
		b.Fatal(err)
	}
	n := 1 << 16 / backends // frontends in the maps at a time
	fes := benchFrontends(n, backends)
	ctx, txn := context.Background(), db.ReadTxn()
	entries := func(first, n int) []reconciler.BatchEntry[*lb.Frontend] {
		batch := make([]reconciler.BatchEntry[*lb.Frontend], n)
		for i := range batch {
			batch[i].Object = fes[(first+i)%len(fes)]
		}
		return batch
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += batchSize {
		if batchSize == 1 {
			if i >= n {
				if err := o.Delete(ctx, txn, 0, fes[i%n]); err != nil {
					b.Fatal(err)
				}
			}
			if err := o.Update(ctx, txn, 0, fes[i%n]); err != nil {
				b.Fatal(err)
			}
			continue
		}
		if i >= n {
			o.DeleteBatch(ctx, txn, entries(i, batchSize))
		}
		batch := entries(i, batchSize)
		o.UpdateBatch(ctx, txn, batch)
		for _, e := range batch {
			if e.Result != nil {
				b.Fatal(e.Result)
			}
		}
	}
}

// BenchmarkFullMapChurn measures the reconciler when a map is full: 1000
// frontends served, 1000 waiting for room; each op deletes the oldest
// served frontend, writes the oldest waiting one into the room that
// freed, and declares the deleted one again, which now waits (in memory:
// the reconciler's own work, refusals and offers of room included).
func BenchmarkFullMapChurn(b *testing.B) {
	const n = 1000
	cfg := bpf.DefaultConfig
	cfg.LBServicesMax = 2 * n // a master and a slot each
	maps, err := bpf.NewMemoryMaps(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	o := initializedOps(b, maps)
	fes := benchFrontends(2*n, 1)
	ctx := context.Background()
	for _, fe := range fes {
		o.Update(ctx, nil, 0, fe) // the second thousand is refused
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		served, waiting := fes[i%(2*n)], fes[(i+n)%(2*n)]
		if err := o.Delete(ctx, nil, 0, served); err != nil {
			b.Fatal(err)
		}
		if err := o.Update(ctx, nil, 0, waiting); err != nil {
			b.Fatal(err)
		}
		if err := o.Update(ctx, nil, 0, served); err == nil {
			b.Fatal("a frontend was written into a full map")
		}
	}
}

// benchFrontends returns n ClusterIP frontends with the given number of
// backends each.
func benchFrontends(n, backends int) []*lb.Frontend {
	policy := &lb.ServiceParams{Name: lb.NewServiceName("bench", "svc"), Source: lb.SourceK8s}
	fes := make([]*lb.Frontend, n)
	for i := range fes {
		bes := make([]lb.BackendRef, backends)
		for j := range bes {
			bes[j] = lb.BackendRef{Weight: lb.DefaultBackendWeight,
				Address: lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{11, byte(j), byte(i >> 8), byte(i)}), 8080, lb.ScopeExternal)}
		}
		fes[i] = &lb.Frontend{
			FrontendParams: lb.FrontendParams{Type: lb.SVCTypeClusterIP,
				Address: lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), 80, lb.ScopeExternal)},
			Policy:   policy,
			Backends: bes,
		}
	}
	return fes
}

// BenchmarkIDAlloc measures allocating an ID with 100,000 in use, freeing
// the oldest each time (IDs are handed out in increasing order).
func BenchmarkIDAlloc(b *testing.B) {
	a := newIDAllocator("bench", "lb_bench", 1<<18)
	marks := 0
	a.persist = func(uint32) error { marks++; return nil }
	const inUse = 100000
	ids := make([]uint32, 0, inUse)
	for range inUse {
		id, err := a.alloc()
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, id)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		a.free(ids[i%inUse])
		id, err := a.alloc()
		if err != nil {
			b.Fatal(err)
		}
		ids[i%inUse] = id
	}
	b.ReportMetric(float64(marks), "marks")
}

// BenchmarkDeleteAffinityFrontends measures deleting 1,000 frontends with
// session affinity in one batch while lb_affinity holds 10,000 entries
// (kernel maps; ns/op is per batch): their entries are found in one walk
// of the map.
func BenchmarkDeleteAffinityFrontends(b *testing.B) {
	const n, clients = 1000, 10000
	maps := benchMaps(b, "kernel")
	o := initializedOps(b, maps)
	fes := benchFrontends(n, 1)
	policy := *fes[0].Policy
	policy.SessionAffinity = true
	for _, fe := range fes {
		fe.Policy = &policy
	}
	batch := make([]reconciler.BatchEntry[*lb.Frontend], n)
	for i := range batch {
		batch[i].Object = fes[i]
	}
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		o.UpdateBatch(ctx, nil, batch)
		keys := make([]bpf.AffinityKey, clients)
		vals := make([]bpf.AffinityValue, clients)
		for i := range keys {
			keys[i] = bpf.AffinityKey{Client: netip.AddrFrom4([4]byte{192, 0, byte(i >> 8), byte(i)}).As16(), RevNatID: fes[i%n].ID}
			vals[i] = bpf.AffinityValue{BackendID: 1}
		}
		if err := maps.Affinity.BatchUpdate(keys, vals); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		o.DeleteBatch(ctx, nil, batch)
		for _, e := range batch {
			if e.Result != nil {
				b.Fatal(e.Result)
			}
		}
	}
	b.StopTimer()
	left := 0
	maps.Affinity.Iterate(func(bpf.AffinityKey, bpf.AffinityValue) bool { left++; return true })
	if left != 0 {
		b.Fatalf("%d affinity entries left", left)
	}
}
