package tables

import (
	"fmt"
	"net/netip"
	"runtime"
	"strconv"
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
)

// benchService returns the i'th service of a benchmark: one ClusterIP
// frontend and n backends.
func benchService(i, n int) (lb.ServiceParams, []lb.BackendParams) {
	name := lb.NewServiceName("bench", "svc-"+strconv.Itoa(i))
	p := lb.ServiceParams{Name: name, Source: lb.SourceK8s, Frontends: []lb.FrontendParams{
		{Address: lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{10, byte(96 + i>>16), byte(i >> 8), byte(i)}), 80, lb.ScopeExternal), Type: lb.SVCTypeClusterIP},
	}}
	bes := make([]lb.BackendParams, n)
	for j := range bes {
		k := i*n + j
		bes[j] = lb.BackendParams{
			Address: lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{11, byte(k >> 16), byte(k >> 8), byte(k)}), 8080, lb.ScopeExternal),
			Weight:  lb.DefaultBackendWeight,
		}
	}
	return p, bes
}

// BenchmarkWriterUpsertService measures declaring services with one
// frontend and one backend each, 500 per write transaction, and the heap
// the tables hold per service afterwards: one Writer call at a time
// ("calls"), and in a Batch of the 500 ("batch", as sources write).
func BenchmarkWriterUpsertService(b *testing.B) {
	b.Run("calls", func(b *testing.B) { benchUpsertServices(b, 1, false) })
	b.Run("batch", func(b *testing.B) { benchUpsertServices(b, 1, true) })
}

// BenchmarkWriterUpsertService10 is BenchmarkWriterUpsertService with
// 10 backends per service, in batches.
func BenchmarkWriterUpsertService10(b *testing.B) { benchUpsertServices(b, 10, true) }

// BenchmarkWriterDeleteService measures deleting services with one
// frontend and n backends (the declaration, then the backends), 500 per
// batch.
func BenchmarkWriterDeleteService(b *testing.B) {
	for _, n := range []int{1, 10} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			w := benchWriter(b)
			inputs := benchInputs(b.N, n)
			writeBenchServices(b, w, inputs, true)
			b.ResetTimer()
			for i := 0; i < b.N; {
				txn := w.WriteTxn()
				err := w.Batch(txn, func() error {
					for end := min(i+500, b.N); i < end; i++ {
						name := inputs[i].p.Name
						if err := w.DeleteService(txn, name, lb.SourceK8s); err != nil {
							return err
						}
						if err := w.SetBackends(txn, name, lb.SourceK8s); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				txn.Commit()
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "services/s")
		})
	}
}

type benchInput struct {
	p   lb.ServiceParams
	bes []lb.BackendParams
}

func benchWriter(b *testing.B) *Writer {
	b.ReportAllocs()
	w, err := New(statedb.New(), nil)
	if err != nil {
		b.Fatal(err)
	}
	return w
}

func benchInputs(n, backends int) []benchInput {
	inputs := make([]benchInput, n)
	for i := range inputs {
		inputs[i].p, inputs[i].bes = benchService(i, backends)
	}
	return inputs
}

// writeBenchServices declares inputs' services and sets their backends,
// 500 per write transaction, in a Batch or one call at a time.
func writeBenchServices(b *testing.B, w *Writer, inputs []benchInput, batched bool) {
	for i := 0; i < len(inputs); {
		txn := w.WriteTxn()
		write := func() error {
			for end := min(i+500, len(inputs)); i < end; i++ {
				if err := w.UpsertService(txn, inputs[i].p); err != nil {
					return err
				}
				if err := w.UpsertBackends(txn, inputs[i].p.Name, lb.SourceK8s, inputs[i].bes...); err != nil {
					return err
				}
			}
			return nil
		}
		var err error
		if batched {
			err = w.Batch(txn, write)
		} else {
			err = write()
		}
		if err != nil {
			b.Fatal(err)
		}
		txn.Commit()
	}
}

func benchUpsertServices(b *testing.B, backends int, batched bool) {
	w := benchWriter(b)
	inputs := benchInputs(b.N, backends)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()

	writeBenchServices(b, w, inputs, batched)

	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "services/s")
	inputs = nil
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(b.N), "heap-B/service")
	b.ReportMetric(float64(int64(after.HeapObjects)-int64(before.HeapObjects))/float64(b.N), "heap-objs/service")
	runtime.KeepAlive(w)
}

// BenchmarkWriterUpsertBackendLargeService measures changing one backend
// (its weight) of a service with 1000 backends, one write transaction per
// change: each change re-selects the service's frontend, so its cost grows
// with the size of the service.
func BenchmarkWriterUpsertBackendLargeService(b *testing.B) {
	b.ReportAllocs()
	w, err := New(statedb.New(), nil)
	if err != nil {
		b.Fatal(err)
	}
	p, bes := benchService(0, 1000)
	mustWrite(b, w, func(txn statedb.WriteTxn) error {
		if err := w.UpsertService(txn, p); err != nil {
			return err
		}
		return w.UpsertBackends(txn, p.Name, lb.SourceK8s, bes...)
	})
	b.ResetTimer()
	for i := range b.N {
		be := bes[i%len(bes)]
		be.Weight = uint16(1 + i%2)
		mustWrite(b, w, func(txn statedb.WriteTxn) error {
			return w.UpsertBackends(txn, p.Name, lb.SourceK8s, be)
		})
	}
}

// selBenchCands returns n active candidates in descending address order
// (so the sort has work to do): half hinted for zone-a (node1's zone), the
// other half for zone-b, so the zone filter applies.
func selBenchCands(n int) []Candidate {
	cands := make([]Candidate, n)
	for i := range n {
		j := n - 1 - i
		zone := "zone-a"
		if i%2 == 1 {
			zone = "zone-b"
		}
		cands[i] = selBE(fmt.Sprintf("10.%d.%d.%d:80/TCP", j>>16&0xff, j>>8&0xff, j&0xff),
			selForZones(zone), selOnNode("node"+strconv.Itoa(i%8)), selInZone(zone))
	}
	return cands
}

func BenchmarkSelectBackends(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			cands := selBenchCands(n)
			fe := selFE("10.96.0.1:80/TCP", lb.SVCTypeClusterIP, "")
			svc := selSvc(lb.TrafficPolicyCluster, lb.TrafficPolicyCluster, lb.TrafficDistributionPreferSameZone)
			node := &lb.Node{Name: "node1", Zone: "zone-a"}
			b.ReportAllocs()
			for b.Loop() {
				refs := SelectBackends(fe, svc, node, false, cands)
				if len(refs) != n/2 {
					b.Fatalf("selected %d backends, want %d", len(refs), n/2)
				}
			}
		})
	}
}

// BenchmarkWriterHistory measures what the journal costs the Writer: the
// batched upsert of BenchmarkWriterUpsertService with each call given a
// cause, with the journal off and on (at its default cap, evicting once
// full). The difference per service is the cost per change (one frontend
// row each).
func BenchmarkWriterHistory(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := map[bool]string{false: "off", true: "on"}[on]
		b.Run(name, func(b *testing.B) {
			w := benchWriter(b)
			if !on {
				w.history = NewHistory(0)
			}
			inputs := benchInputs(b.N, 1)
			causes := make([]*Cause, len(inputs))
			for i := range causes {
				causes[i] = &Cause{Source: "k8s", Kind: "Service", Name: inputs[i].p.Name.String(), Version: "resourceVersion " + strconv.Itoa(i)}
			}
			b.ResetTimer()
			for i := 0; i < len(inputs); {
				txn := w.WriteTxn()
				err := w.Batch(txn, func() error {
					for end := min(i+500, len(inputs)); i < end; i++ {
						w.SetCause(txn, causes[i])
						if err := w.UpsertService(txn, inputs[i].p); err != nil {
							return err
						}
						if err := w.UpsertBackends(txn, inputs[i].p.Name, lb.SourceK8s, inputs[i].bes...); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				txn.Commit()
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "services/s")
		})
	}
}

// BenchmarkHistoryCostPerChange measures the journal's own work per
// frontend change, apart from the Writer's (whose time on a shared
// machine varies more than the journal costs): staging the entry in the
// transaction and appending it on commit, 500 per transaction, at the
// default cap (evicting once full). Compare its ns/op with
// BenchmarkWriterUpsertService/batch's per service (one change each).
func BenchmarkHistoryCostPerChange(b *testing.B) {
	b.ReportAllocs()
	h := NewHistory(DefaultHistoryMaxBytes)
	inputs := benchInputs(1000, 1)
	rows := make([]*lb.Frontend, len(inputs))
	for i, in := range inputs {
		rows[i] = &lb.Frontend{FrontendParams: in.p.Frontends[0], Service: in.p.Name}
		rows[i].SetBackends([]lb.BackendRef{{Address: in.bes[0].Address, Weight: 1}})
	}
	cause := &Cause{Source: "k8s", Kind: "EndpointSlice", Name: "bench/svc", Version: "resourceVersion 1"}
	jt := &journalTxn{h: h}
	ch := &changes{jt: jt}
	b.ResetTimer()
	for i := 0; i < b.N; {
		for end := min(i+500, b.N); i < end; i++ {
			row := rows[i%len(rows)]
			ch.stage(historyEntry{addr: row.Address, service: row.Service, causes: causeSet{first: cause}, old: row})
		}
		h.commit(jt.staged, func() {})
		jt.staged = jt.staged[:0]
	}
}

// BenchmarkWriterSetClusterBackends measures one remote cluster's update
// of a global service that has 10 local backends and 10 from each of 10
// clusters (110), one write transaction per update: "one-moved" moves
// one of the cluster's 10 backends to another port (a pod replaced),
// "all-moved" all ten (the service's port changed).
func BenchmarkWriterSetClusterBackends(b *testing.B) {
	for _, moved := range []int{1, 10} {
		b.Run(map[int]string{1: "one-moved", 10: "all-moved"}[moved], func(b *testing.B) {
			b.ReportAllocs()
			w, name := globalServiceOfTenClusters(b)
			b.ResetTimer()
			for i := range b.N {
				bes := remoteBackends(1, uint16(9000+i%2), moved)
				mustWrite(b, w, func(txn statedb.WriteTxn) error {
					return w.SetClusterBackends(txn, name, lb.SourceKVStore, 1, bes...)
				})
			}
		})
	}
}

// BenchmarkWriterSetClustersBackends measures ten remote clusters' update
// of the global service of BenchmarkWriterSetClusterBackends in one write
// transaction and batch, each moving one backend: "one-call" with one
// SetClustersBackends (one look at the service's 110 backends),
// "ten-calls" with a SetClusterBackends per cluster.
func BenchmarkWriterSetClustersBackends(b *testing.B) {
	for _, oneCall := range []bool{true, false} {
		b.Run(map[bool]string{true: "one-call", false: "ten-calls"}[oneCall], func(b *testing.B) {
			b.ReportAllocs()
			w, name := globalServiceOfTenClusters(b)
			b.ResetTimer()
			for i := range b.N {
				sets := make([]ClusterBackends, 10)
				for c := range sets {
					sets[c] = ClusterBackends{ClusterID: uint32(c + 1), Backends: remoteBackends(c+1, uint16(9000+i%2), 1)}
				}
				mustWrite(b, w, func(txn statedb.WriteTxn) error {
					return w.Batch(txn, func() error { // as the importer writes: refreshed once
						if oneCall {
							return w.SetClustersBackends(txn, name, lb.SourceKVStore, sets...)
						}
						for _, set := range sets {
							if err := w.SetClusterBackends(txn, name, lb.SourceKVStore, set.ClusterID, set.Backends...); err != nil {
								return err
							}
						}
						return nil
					})
				})
			}
		})
	}
}

// globalServiceOfTenClusters returns a Writer holding a global service
// with 10 local backends and 10 from each of clusters 1-10
// (remoteBackends at port 8080).
func globalServiceOfTenClusters(b *testing.B) (*Writer, lb.ServiceName) {
	w, err := New(statedb.New(), nil)
	if err != nil {
		b.Fatal(err)
	}
	p, local := benchService(0, 10)
	p.Annotations = map[string]string{lb.AnnotationGlobal: "true"}
	mustWrite(b, w, func(txn statedb.WriteTxn) error {
		if err := w.UpsertService(txn, p); err != nil {
			return err
		}
		if err := w.UpsertBackends(txn, p.Name, lb.SourceK8s, local...); err != nil {
			return err
		}
		for c := 1; c <= 10; c++ {
			if err := w.SetClusterBackends(txn, p.Name, lb.SourceKVStore, uint32(c), remoteBackends(c, 8080, 0)...); err != nil {
				return err
			}
		}
		return nil
	})
	return w, p.Name
}

// remoteBackends are cluster c's 10 backends of the service, the first
// moved of them at port, the others at 8080.
func remoteBackends(c int, port uint16, moved int) []lb.BackendParams {
	bes := make([]lb.BackendParams, 10)
	for j := range bes {
		pt := uint16(8080)
		if j < moved {
			pt = port
		}
		bes[j] = lb.BackendParams{Address: lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{byte(20 + c), 0, 0, byte(j)}), pt, lb.ScopeExternal),
			Weight: lb.DefaultBackendWeight, ClusterID: uint32(c)}
	}
	return bes
}

// BenchmarkAddrKey measures building an address's index key into a
// buffer, as each lookup of a frontend or backend row does.
func BenchmarkAddrKey(b *testing.B) {
	for _, s := range []string{"10.96.0.1:80/TCP", "[fd00::1]:443/TCP"} {
		b.Run(s, func(b *testing.B) {
			a := lb.MustParseL3n4Addr(s)
			var buf addrKeyBuf
			n := 0
			for b.Loop() {
				n += len(buf.key(a))
			}
			if n == 0 {
				b.Fatal("empty keys")
			}
		})
	}
}
