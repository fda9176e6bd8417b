package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// top ranks by bytes per second since the previous screen (or by totals
// on the first), adds a frontend's backends up, and names what the maps no
// longer have as gone.
func TestTopRanksByRateAndAddsUpFrontends(t *testing.T) {
	at := time.Unix(1000, 0)
	prev := &topSample{at: at, counters: map[bpf.CounterKey]bpf.CounterValue{
		{RevNatID: 1, BackendID: 1}: {Flows: 10, Packets: 100, Bytes: 10000},
		{RevNatID: 1, BackendID: 2}: {Flows: 1, Packets: 10, Bytes: 1000},
	}}
	cur := &topSample{
		at: at.Add(2 * time.Second),
		counters: map[bpf.CounterKey]bpf.CounterValue{
			{RevNatID: 1, BackendID: 1}: {Flows: 10, Packets: 100, Bytes: 10000}, // idle
			{RevNatID: 1, BackendID: 2}: {Flows: 5, Packets: 50, Bytes: 9000},    // busy
			{RevNatID: 2, BackendID: 3}: {Flows: 2, Packets: 4, Bytes: 400},      // new
		},
		drops:     map[uint32]uint64{2: 7},
		frontends: map[uint32]string{1: "10.96.0.1:80"},
		backends:  map[uint32]string{1: "10.1.0.1:8080/TCP", 2: "10.1.0.2:8080/TCP", 3: "10.1.0.3:8080/TCP"},
	}
	fes, bes := topRows(prev, cur, map[uint32]string{1: "shop/web"})
	if len(fes) != 2 || fes[0].name != "10.96.0.1:80" || fes[0].service != "shop/web" || fes[0].bytes != 19000 || fes[0].bytesRate != 4000 {
		t.Errorf("frontends: %+v; want 10.96.0.1:80 first, 19000 bytes, 4000 B/s", fes)
	}
	if fes[1].name != "frontend 2 (gone)" || fes[1].drops != 7 || fes[1].bytesRate != 200 {
		t.Errorf("second frontend: %+v; want the gone one with 7 drops, 200 B/s", fes[1])
	}
	var order []string
	for _, b := range bes {
		order = append(order, b.name)
	}
	want := []string{"10.1.0.2:8080/TCP via 10.96.0.1:80", "10.1.0.3:8080/TCP via frontend 2 (gone)", "10.1.0.1:8080/TCP via 10.96.0.1:80"}
	if strings.Join(order, "; ") != strings.Join(want, "; ") {
		t.Errorf("backends in order %q, want %q", order, want)
	}
	if first, _ := topRows(nil, cur, nil); first[0].bytesRate != 0 || first[0].bytes != 19000 {
		t.Errorf("first screen: %+v; want totals and no rates", first[0])
	}
}

// top reads the counters an agent's datapath keeps in its pinned maps and
// prints them, named from the maps, without an agent to ask.
func TestTopReadsThePinnedCounters(t *testing.T) {
	cfg := bpftest.Config(t)
	m := bpftest.KernelMaps(t, cfg)
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	perCPU := make([]bpf.CounterValue, cpus)
	perCPU[0] = bpf.CounterValue{Flows: 3, Packets: 30, Bytes: 3000}
	perCPU[cpus-1] = bpf.CounterValue{Flows: 1, Packets: 10, Bytes: 1000}
	drops := make([]uint64, cpus)
	drops[0] = 5
	for _, err := range []error{
		m.Backends.Update(1, bpf.NewBackend(lb.BackendRef{Address: lb.MustParseL3n4Addr("10.1.0.1:8080/TCP")}, 0)),
		m.RevNat.Update(1, bpf.NewRevNatValue(lb.MustParseL3n4Addr("10.96.0.1:80/TCP"))),
		m.Counters.Update(bpf.CounterKey{RevNatID: 1, BackendID: 1}, perCPU),
		m.Drops.Update(bpf.DropKey{RevNatID: 1, Reason: bpf.DropNoBackend}, drops),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"top", "--lb-pin-dir", cfg.LBPinDir, "--api", "http://127.0.0.1:1", "--iterations", "2", "--interval", "10ms"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	screens := strings.Split(stdout.String(), "lbstate top")
	if len(screens) != 3 {
		t.Fatalf("want 2 screens:\n%s", stdout.String())
	}
	for _, want := range []string{"10.96.0.1:80  -  -  -  -  4000  40  4  5", "10.1.0.1:8080/TCP via 10.96.0.1:80  -  -  -  -  4000  40  4"} {
		if !strings.Contains(squeeze(screens[1]), want) {
			t.Errorf("first screen lacks %q:\n%s", want, screens[1])
		}
	}
	if !strings.Contains(squeeze(screens[2]), "10.96.0.1:80  -  0.0  0.0  0.0  4000  40  4  5") {
		t.Errorf("second screen lacks the idle rates:\n%s", screens[2])
	}
}

// squeeze turns runs of spaces into two, so that tests do not depend on
// column widths.
func squeeze(s string) string {
	for strings.Contains(s, "   ") {
		s = strings.ReplaceAll(s, "   ", "  ")
	}
	return s
}
