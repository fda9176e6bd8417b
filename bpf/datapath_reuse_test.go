package bpf_test

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// reuseFrontends writes frontends A (10.96.0.1:80, ID 1, backends
// 101..116) and B (10.96.0.2:80, ID 2, backends 201..216), each filling
// its master's inline slots, and returns each one's two masters: all its
// backends, and half of them (zeros after).
func reuseFrontends(h *dpHarness) (a, b [2]bpf.ServiceValue) {
	masters := func(id uint32) (vs [2]bpf.ServiceValue) {
		var ids []uint32
		for s := range uint32(bpf.InlineSlots) {
			bid := 100*id + 1 + s
			h.backend(bid, fmt.Sprintf("10.%d.0.%d:8080/TCP", id, s+1), lb.BackendActive)
			ids = append(ids, bid)
		}
		h.frontend(testFrontend{addr: fmt.Sprintf("10.96.0.%d:80/TCP", id), id: id, slots: ids})
		for i, n := range []int{len(ids), len(ids) / 2} {
			vs[i] = bpf.ServiceValue{RevNatID: id, ServiceMaster: bpf.ServiceMaster{
				Count: uint16(n), Type: uint8(lb.SVCTypeClusterIP), Algorithm: bpf.AlgorithmRandom}}
			vs[i].SetInline(ids[:n])
		}
		return vs
	}
	return masters(1), masters(2)
}

// allowedCPUs returns the CPUs the test may run on.
func allowedCPUs(t *testing.T) []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	var cpus []int
	for c := range 8 * int(unsafe.Sizeof(set)) {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// onCPU runs fn on a thread of its own bound to cpu, and gives the
// thread back as it was.
func onCPU(t *testing.T, cpu int, fn func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var was, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		t.Error(err)
		return
	}
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		t.Errorf("bind to CPU %d: %v", cpu, err)
		return
	}
	defer func() {
		if err := unix.SchedSetaffinity(0, &was); err != nil {
			t.Errorf("unbind from CPU %d: %v", cpu, err)
		}
	}()
	fn()
}

// raceOnTwoCPUs calls write(0), write(1), ... on cpus[0] while read(0),
// read(1), ... runs on cpus[1] for 3 s (or until read says stop), and
// returns write's first error.
func raceOnTwoCPUs(t *testing.T, cpus []int, write func(i int) error, read func(i int) (more bool)) error {
	var (
		wg       sync.WaitGroup
		stop     = make(chan struct{})
		writeErr error
	)
	wg.Go(func() {
		onCPU(t, cpus[0], func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if writeErr = write(i); writeErr != nil {
					return
				}
			}
		})
	})
	deadline := time.Now().Add(3 * time.Second)
	onCPU(t, cpus[1], func() {
		for i := 0; time.Now().Before(deadline) && read(i); i++ {
		}
	})
	close(stop)
	wg.Wait()
	return writeErr
}

// The kernel hands a freed lb_services element to the next insert on its
// CPU (Linux 6.1+), for any key: here A's master is rewritten twice (the
// second rewrite takes the element the first freed, for A's other
// master) and B's once (taking the element A's last rewrite freed),
// while new flows to A run on the other CPU. Every flow the datapath
// balanced went to one of A's backends and was counted under A; none
// was dropped for a slot a copy mixing two masters named empty (A's and
// B's masters alternate between 16 and 8 slots).
func TestTCNeverBalancesOnACopyOfAMasterReusedUnderIt(t *testing.T) {
	cpus := allowedCPUs(t)
	if len(cpus) < 2 {
		t.Skip("needs two CPUs: one rewrites masters while the other reads them")
	}
	h := newDatapath(t, dpConfig())
	d, err := bpf.LoadBenchDatapath(h.maps, false)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	a, b := reuseFrontends(h)
	keyA := bpf.NewServiceKey(lb.MustParseL3n4Addr("10.96.0.1:80/TCP"), 0)
	keyB := bpf.NewServiceKey(lb.MustParseL3n4Addr("10.96.0.2:80/TCP"), 0)
	pkt := bpftest.Packet(t, flow("10.0.0.1:40000", "10.96.0.1:80", lb.ProtoTCP), 64)
	prog := d.Program("lb_bench_new")

	const runs = 1 << 16 // new flows per BPF_PROG_TEST_RUN
	var writes, batches int
	err = raceOnTwoCPUs(t, cpus, func(i int) error {
		ops := []func() error{
			// A twice: the second rewrite takes the element
			// the first freed, for A's other master.
			func() error { return h.maps.Services.Update(keyA, a[0]) },
			func() error { return h.maps.Services.Update(keyA, a[1]) },
			// B: takes the element A's last rewrite freed.
			func() error { return h.maps.Services.Update(keyB, b[i%2]) },
		}
		if i%8 == 0 { // B deleted and inserted again: its element freed, then one taken
			ops = append(ops, func() error { return h.maps.Services.Delete(keyB) },
				func() error { return h.maps.Services.Update(keyB, b[0]) })
		}
		for _, op := range ops {
			if err := op(); err != nil {
				return err
			}
			writes++
		}
		return nil
	}, func(int) bool {
		if _, _, err := prog.Benchmark(pkt, runs, nil); err != nil {
			t.Error(err)
			return false
		}
		batches++
		return true
	})
	if err != nil {
		t.Fatal(err)
	}

	var flows uint64
	wrong := map[bpf.CounterKey]uint64{}
	h.check(h.maps.Counters.Iterate(func(k bpf.CounterKey, v []bpf.CounterValue) bool {
		n := bpf.SumCounters(v).Flows
		flows += n
		if k.RevNatID != 1 || !slices.Contains(a[0].Inline(), k.BackendID) {
			wrong[k] += n
		}
		return true
	}))
	empty, torn := h.drops(1, bpf.DropMissingEntry), h.drops(0, bpf.DropTornMaster)
	t.Logf("%d master writes, %d new flows to A in %d runs of %d: %d balanced, %d given up as torn",
		writes, batches*runs, batches, runs, flows, torn)
	if len(wrong) > 0 {
		t.Errorf("flows to A balanced on another master: %v (frontend ID, backend ID: flows)", wrong)
	}
	if empty > 0 {
		t.Errorf("%d flows to A dropped for an empty slot: a copy took its count and its slots from two masters", empty)
	}
	if flows == 0 || writes == 0 {
		t.Errorf("%d flows balanced, %d writes: the race was not run", flows, writes)
	}
}
