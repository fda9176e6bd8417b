package bpf_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// A kernel hash map rewrites an entry by linking the new element at its
// bucket's head, then unlinking the old one: a lookup that passed the
// head before the link and reaches the old element's place after the
// unlink finds neither, if another key's element comes before it in the
// bucket. Here every frontend of a map of few buckets (so that buckets
// hold several) is rewritten again and again on one CPU while new flows
// to them run on another: every flow is balanced or counted as a drop,
// none passes as if its frontend did not exist.
func TestTCNeverPassesAFlowToAFrontendRewrittenUnderItsLookup(t *testing.T) {
	cpus := allowedCPUs(t)
	if len(cpus) < 2 {
		t.Skip("needs two CPUs: one rewrites masters while the other reads them")
	}
	const frontends = 8
	cfg := dpConfig()
	cfg.LBServicesMax = frontends // as many buckets as entries: some share one
	h := newDatapath(t, cfg)
	d, err := bpf.LoadBenchDatapath(h.maps, false)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var (
		keys    []bpf.ServiceKey
		masters [][2]bpf.ServiceValue // all the frontend's backends, and one
		pkts    [][]byte
	)
	for id := uint32(1); id <= frontends; id++ {
		ids := []uint32{100*id + 1, 100*id + 2}
		for i, bid := range ids {
			h.backend(bid, fmt.Sprintf("10.%d.0.%d:8080/TCP", id, i+1), lb.BackendActive)
		}
		addr := fmt.Sprintf("10.96.0.%d:80", id)
		h.frontend(testFrontend{addr: addr + "/TCP", id: id, slots: ids})
		var vs [2]bpf.ServiceValue
		for i, n := range []int{2, 1} {
			vs[i] = bpf.ServiceValue{RevNatID: id, ServiceMaster: bpf.ServiceMaster{
				Count: uint16(n), Type: uint8(lb.SVCTypeClusterIP), Algorithm: bpf.AlgorithmRandom}}
			vs[i].SetInline(ids[:n])
		}
		keys = append(keys, bpf.NewServiceKey(lb.MustParseL3n4Addr(addr+"/TCP"), 0))
		masters = append(masters, vs)
		pkts = append(pkts, bpftest.Packet(t, flow("10.0.0.1:40000", addr, lb.ProtoTCP), 64))
	}
	prog := d.Program("lb_bench_new")

	const runs = 1 << 12 // new flows per BPF_PROG_TEST_RUN
	var (
		wg       sync.WaitGroup
		stop     = make(chan struct{})
		writes   int
		writeErr error
		total    uint64
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		onCPU(t, cpus[0], func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				for f := range keys {
					if err := h.maps.Services.Update(keys[f], masters[f][i%2]); err != nil {
						writeErr = err
						return
					}
					writes++
				}
			}
		})
	}()
	deadline := time.Now().Add(3 * time.Second)
	onCPU(t, cpus[1], func() {
		for i := 0; time.Now().Before(deadline); i++ {
			if _, _, err := prog.Benchmark(pkts[i%frontends], runs, nil); err != nil {
				t.Error(err)
				return
			}
			total += runs
		}
	})
	close(stop)
	wg.Wait()
	if writeErr != nil {
		t.Fatal(writeErr)
	}

	var balanced, dropped uint64
	h.check(h.maps.Counters.Iterate(func(k bpf.CounterKey, v []bpf.CounterValue) bool {
		balanced += bpf.SumCounters(v).Flows
		return true
	}))
	h.check(h.maps.Drops.Iterate(func(k bpf.DropKey, v []uint64) bool {
		for _, n := range v {
			dropped += n
		}
		return true
	}))
	t.Logf("%d master writes, %d new flows: %d balanced, %d dropped", writes, total, balanced, dropped)
	if passed := total - balanced - dropped; passed > 0 {
		t.Errorf("%d of %d new flows to frontends passed unbalanced: their lookup missed a master being rewritten", passed, total)
	}
	if balanced == 0 || writes == 0 {
		t.Errorf("%d flows balanced, %d writes: the race was not run", balanced, writes)
	}
}
