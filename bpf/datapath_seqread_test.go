package bpf_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// The datapath reads a master with one lookup when no write of
// lb_services overlapped the read (lb_services_seq), and guarded
// otherwise. These tests make every guarded read fail
// (WithGuardedRechecks: the flow is dropped as torn-master), so that a
// flow balanced is one the single lookup read, and a flow dropped one
// read guarded.

// guardedFailing is the datapath's options with every guarded read of a
// master failing.
var guardedFailing = bpf.WithGuardedRechecks(bpf.DefaultDatapathOptions, 3)

// sendFlows sends n new flows to the frontend 10.96.0.1:80 from ports
// from on, and returns how many were balanced to one of backends and
// how many dropped; it fails the test for any other outcome.
func sendFlows(h *dpHarness, from, n int, backends []string) (balanced, dropped int) {
	h.t.Helper()
	for port := from; port < from+n; port++ {
		f := flow(fmt.Sprintf("10.0.0.1:%d", port), "10.96.0.1:80", lb.ProtoTCP)
		switch verdict, out := h.send("lb_tc_ingress", f); {
		case verdict == actOK && slices.Contains(backends, out.Dst.String()):
			balanced++
		case verdict == actShot:
			dropped++
		default:
			h.t.Fatalf("%v: verdict %d to %s, want it balanced to one of %v or dropped", f, verdict, out.Dst, backends)
		}
	}
	return balanced, dropped
}

// A read that no write overlaps takes one lookup: with every guarded
// read failing, its flows are still balanced. While a write is in
// flight (announced, not yet ended) every read is guarded, and fails;
// once it ends, reads take one lookup again. Both with the loads as x86
// orders them and fenced, as on CPUs that reorder loads.
func TestTCReadsAMasterWithOneLookupUnlessAWriteIsInFlight(t *testing.T) {
	for _, weak := range []bool{false, true} {
		t.Run(map[bool]string{false: "ordered", true: "fenced"}[weak], func(t *testing.T) {
			was := bpf.SetWeakMemoryOrder(weak)
			defer bpf.SetWeakMemoryOrder(was)
			h := newDatapathOptions(t, dpConfig(), guardedFailing)
			h.backend(1, "10.1.0.1:8080/TCP", lb.BackendActive)
			h.backend(2, "10.1.0.2:8080/TCP", lb.BackendActive)
			h.frontend(testFrontend{addr: "10.96.0.1:80/TCP", id: 1, slots: []uint32{1, 2}})
			backends := []string{"10.1.0.1:8080", "10.1.0.2:8080"}
			seq := h.maps.ServicesSeq

			for i, step := range []struct {
				what     string
				inFlight bool
			}{{"no write", false}, {"a write in flight", true}, {"the write ended", false}} {
				if step.inFlight {
					seq.BeginWrite()
				} else if i > 0 {
					seq.EndWrite()
				}
				balanced, dropped := sendFlows(h, 40000+100*i, 10, backends)
				if want := map[bool]int{false: 10, true: 0}[step.inFlight]; balanced != want || balanced+dropped != 10 {
					t.Errorf("%s: %d of 10 flows balanced, %d dropped; want %d balanced", step.what, balanced, dropped, want)
				}
			}
			if torn := h.drops(0, bpf.DropTornMaster); torn != 10 {
				t.Errorf("%d flows dropped as %s, want the 10 sent while the write was in flight", torn, bpf.DropReasons[bpf.DropTornMaster])
			}
		})
	}
}

// The word is pinned with the maps: programs an agent loaded, still
// running after it stopped, see the writes of the agent started after it
// on the same pin directory, and read guarded while one is in flight.
func TestTCProgramsOfAStoppedAgentSeeTheWritesOfTheNextOne(t *testing.T) {
	bpftest.Require(t)
	cfg := dpConfig()
	cfg.LBPinDir = bpftest.Config(t).LBPinDir
	first, err := bpf.NewKernelMaps(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d, err := bpf.LoadDatapathOptions(first, guardedFailing)
	if err != nil {
		first.Close()
		t.Fatal(err)
	}
	defer d.Close()
	h := &dpHarness{t: t, maps: first, dp: d}
	h.backend(1, "10.1.0.1:8080/TCP", lb.BackendActive)
	h.frontend(testFrontend{addr: "10.96.0.1:80/TCP", id: 1, slots: []uint32{1}})
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	h.maps = bpftest.KernelMaps(t, cfg) // the next agent
	h.maps.ServicesSeq.BeginWrite()
	balanced, dropped := sendFlows(h, 40000, 10, []string{"10.1.0.1:8080"})
	h.maps.ServicesSeq.EndWrite()
	if balanced != 0 || dropped != 10 {
		t.Errorf("with the next agent's write in flight, %d of 10 flows balanced by one lookup, %d dropped; want every read guarded", balanced, dropped)
	}
	if balanced, _ := sendFlows(h, 40100, 10, []string{"10.1.0.1:8080"}); balanced != 10 {
		t.Errorf("after the next agent's write, %d of 10 flows balanced, want 10", balanced)
	}
}

// While one CPU rewrites masters (each frontend's two in turn, as the
// reconciler would) and deletes and inserts another frontend's, whose
// elements the kernel hands from one key to the other, new flows on
// another CPU are balanced on a read of one lookup when no write
// overlapped it, else read guarded, which fails here and drops them.
// None is balanced on a wrong copy (to another frontend's backend, or
// dropped for an empty slot), none passes as if its frontend were
// missing, and the one-lookup reads balance flows while the writes go
// on.
func TestTCNeverMisreadsAMasterWithOneLookupWhileAnotherCPUWrites(t *testing.T) {
	const n = 8
	writes := 0
	h, total := rewriteRaceOptions(t, guardedFailing, 1, n, 2, func(i int, m bpf.Map[bpf.ServiceKey, bpf.ServiceValue], keys []bpf.ServiceKey, vals []bpf.ServiceValue) error {
		if err := rewriteMasters(i, m, keys, vals, &writes); err != nil {
			return err
		}
		// A frontend no flow goes to, deleted and written again: its
		// element freed, and one taken.
		other := bpf.NewServiceKey(lb.MustParseL3n4Addr("10.96.1.1:80/TCP"), 0)
		if err := m.Delete(other); err != nil {
			return err
		}
		writes++
		return m.Update(other, bpf.ServiceValue{RevNatID: 99, ServiceMaster: bpf.ServiceMaster{Count: 1, Type: uint8(lb.SVCTypeClusterIP), Algorithm: bpf.AlgorithmRandom}})
	})
	balanced, dropped := raceOutcome(h)
	torn := h.drops(0, bpf.DropTornMaster)
	t.Logf("%d writes, %d new flows: %d balanced by one lookup, %d read guarded (dropped)", writes, total, balanced, torn)
	wrong := map[bpf.CounterKey]uint64{}
	h.check(h.maps.Counters.Iterate(func(k bpf.CounterKey, v []bpf.CounterValue) bool {
		if k.RevNatID < 1 || k.RevNatID > n || k.BackendID != 100*k.RevNatID+1 && k.BackendID != 100*k.RevNatID+2 {
			wrong[k] += bpf.SumCounters(v).Flows
		}
		return true
	}))
	if len(wrong) > 0 {
		t.Errorf("flows balanced on another frontend's master: %v (frontend ID, backend ID: flows)", wrong)
	}
	if dropped != torn {
		t.Errorf("%d flows dropped, %d of them as %s: the others for a wrong copy", dropped, torn, bpf.DropReasons[bpf.DropTornMaster])
	}
	if passed := int64(total) - int64(balanced+dropped); passed > 0 { // at least that many
		t.Errorf("%d of %d new flows passed unbalanced: a read of one lookup missed a master being rewritten", passed, total)
	}
	if balanced == 0 || writes == 0 {
		t.Errorf("%d flows balanced, %d writes: the one-lookup reads balanced nothing while the writes ran", balanced, writes)
	}
}

// A one-lookup read checks the word again after its copy: a write done
// between the first read of the word and the second (here, by the
// datapath itself, between the copy and the second read, as a writer on
// another CPU may while this one is held up by an interrupt) sends the
// read guarded, which fails here and drops the flow. The race tests
// cannot catch a missing second check: a write takes its element
// hundreds of nanoseconds after announcing itself, longer than an
// uninterrupted read lasts.
func TestTCDoesNotTrustAOneLookupReadThatAWriteDoneDuringItOverlapped(t *testing.T) {
	h := newDatapathOptions(t, dpConfig(), bpf.WithWriteDuringRead(guardedFailing))
	h.backend(1, "10.1.0.1:8080/TCP", lb.BackendActive)
	h.frontend(testFrontend{addr: "10.96.0.1:80/TCP", id: 1, slots: []uint32{1}})
	before := h.maps.ServicesSeq.Load()
	balanced, dropped := sendFlows(h, 40000, 10, []string{"10.1.0.1:8080"})
	if balanced != 0 || dropped != 10 {
		t.Errorf("with a write done during every one-lookup read, %d of 10 flows balanced on that read, %d dropped; want every read guarded", balanced, dropped)
	}
	if torn := h.drops(0, bpf.DropTornMaster); torn != 10 {
		t.Errorf("%d flows dropped as %s, want 10", torn, bpf.DropReasons[bpf.DropTornMaster])
	}
	if after := h.maps.ServicesSeq.Load(); after>>32 <= before>>32 {
		t.Errorf("lb_services_seq %#x -> %#x: the injected writes were not counted, and the test shows nothing", before, after)
	}
}
