package bpf_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// BenchmarkDatapath times lb_tc_ingress per packet, in the kernel, with
// BPF_PROG_TEST_RUN's repeat: new flows (each run a SYN from a new client
// address: frontend lookup, backend selection, two conntrack inserts,
// counters, DNAT) and established ones (an ACK of a flow its SYN created:
// conntrack hit, backend lookup, counters, DNAT), IPv4 and IPv6, random
// and Maglev, to a frontend with 10 backends. The bench programs put the packet back after each run
// (c/bench.h); ns/packet subtracts what that costs alone, measured the
// same way.
func BenchmarkDatapath(b *testing.B) {
	for _, kind := range []string{"new", "established"} {
		for _, fam := range []string{"IPv4", "IPv6"} {
			for _, alg := range []string{"random", "maglev"} {
				b.Run(kind+"/"+fam+"/"+alg, func(b *testing.B) { benchDatapath(b, kind, fam == "IPv6", alg == "maglev", false) })
			}
		}
	}
}

// BenchmarkDatapathWithReports is BenchmarkDatapath (IPv4) with
// connection reports on: an established flow's packet is the SYN again,
// unanswered, reported once and then only checked.
func BenchmarkDatapathWithReports(b *testing.B) {
	for _, kind := range []string{"new", "established"} {
		for _, alg := range []string{"random", "maglev"} {
			b.Run(kind+"/IPv4/"+alg, func(b *testing.B) { benchDatapath(b, kind, false, alg == "maglev", true) })
		}
	}
}

// BenchmarkDatapathNewFlowUnfilled is BenchmarkDatapath's new flows
// (random) into an lb_ct four times larger than the run's entries, as
// on a node whose collector keeps lb_ct from filling: no insert evicts.
// BenchmarkDatapath's lb_ct is full after its first 65,536 flows, and
// from then on each of a new flow's two inserts evicts an entry first.
func BenchmarkDatapathNewFlowUnfilled(b *testing.B) {
	for _, fam := range []string{"IPv4", "IPv6"} {
		b.Run(fam, func(b *testing.B) {
			cfg := bpf.DefaultConfig
			cfg.LBCTMax = uint32(max(8*b.N, 1<<17))
			benchDatapathIn(b, cfg, "new", fam == "IPv6", false, false)
		})
	}
}

func benchDatapath(b *testing.B, kind string, v6, maglev, reports bool) {
	benchDatapathIn(b, bpf.DefaultConfig, kind, v6, maglev, reports)
}

func benchDatapathIn(b *testing.B, cfg bpf.Config, kind string, v6, maglev, reports bool) {
	h := newDatapath(b, cfg)
	d, err := bpf.LoadBenchDatapath(h.maps, reports)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	fe, client := "10.96.0.1:80/TCP", "10.0.0.1:40000"
	var slots []uint32
	for i := uint32(1); i <= 10; i++ {
		backend := fmt.Sprintf("10.1.0.%d:8080/TCP", i)
		if v6 {
			backend = fmt.Sprintf("[fd00:1::%d]:8080/TCP", i)
		}
		h.backend(i, backend, lb.BackendActive)
		slots = append(slots, i)
	}
	if v6 {
		fe, client = "[fd00:96::1]:80/TCP", "[fd00::1]:40000"
	}
	h.frontend(testFrontend{addr: fe, id: 1, maglev: maglev, slots: slots})
	pkt := bpftest.Packet(b, flow(client, lb.MustParseL3n4Addr(fe).AddrPort().String(), lb.ProtoTCP), 64)
	prog, copyProg := d.Program("lb_bench_est"), d.Program("lb_bench_copy")
	if kind == "new" {
		prog, copyProg = d.Program("lb_bench_new"), d.Program("lb_bench_copy_new")
	}
	if verdict, _, err := prog.Test(pkt); err != nil || verdict != actOK { // and establish the flow
		b.Fatalf("verdict %d, %v", verdict, err)
	}
	if kind == "established" && !reports {
		// What an established flow carries; a SYN again (reports) is
		// the rare retransmission, which takes the conntrack subprogram.
		pkt = bpftest.TCPPacket(b, flow(client, lb.MustParseL3n4Addr(fe).AddrPort().String(), lb.ProtoTCP), 64, "A")
	}
	benchPrograms(b, prog, copyProg, pkt)
}

// benchPrograms reports the time of a run of prog on pkt (ns/run) and
// that less copyProg's, which only saves and restores the packet
// (ns/packet).
func benchPrograms(b *testing.B, prog, copyProg *ebpf.Program, pkt []byte) {
	b.ResetTimer()
	_, perRun, err := prog.Benchmark(pkt, b.N, b.ResetTimer)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	_, copyPerRun, err := copyProg.Benchmark(pkt, b.N, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(perRun.Nanoseconds()), "ns/run")
	b.ReportMetric(float64((perRun - copyPerRun).Nanoseconds()), "ns/packet")
}

// BenchmarkDatapathNoFrontend times the first packet of a flow to an
// address no frontend has, as every packet of other traffic that
// conntrack does not know: four lb_services reads that miss (its
// address and the NodePort any-address, each with its protocol and
// with any).
func BenchmarkDatapathNoFrontend(b *testing.B) {
	h := newDatapath(b, bpf.DefaultConfig)
	d, err := bpf.LoadBenchDatapath(h.maps, false)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	h.backend(1, "10.1.0.1:8080/TCP", lb.BackendActive)
	h.frontend(testFrontend{addr: "10.96.0.1:80/TCP", id: 1, slots: []uint32{1}})
	pkt := bpftest.Packet(b, flow("10.0.0.1:40000", "10.97.0.1:80", lb.ProtoTCP), 64)
	prog := d.Program("lb_bench_new")
	if verdict, out, err := prog.Test(pkt); err != nil || verdict != actOK || !bytes.Equal(out, pkt) {
		b.Fatalf("verdict %d, %v: want the packet passed as it came", verdict, err)
	}
	benchPrograms(b, prog, d.Program("lb_bench_copy_new"), pkt)
}

// BenchmarkDatapathSocketConnect times connect() of a UDP socket to a
// frontend from a socket of a cgroup with the socket programs, against the
// same connect() to the backend from a socket of a cgroup with none, in a
// network namespace of the test's own: the median of each, interleaved in
// one process so that other load weighs on both alike. ns/overhead is the
// difference; ns/close-overhead is the same for close() (lb_sock_release).
func BenchmarkDatapathSocketConnect(b *testing.B) {
	h := newDatapath(b, dpConfig())
	ns, cg := bpftest.NewNetns(b), bpftest.Cgroup(b)
	if err := h.dp.AttachCgroup(cg); err != nil {
		b.Fatal(err)
	}
	// The socket-less cgroup is one of the benchmark's own too (a unique
	// name, removed with its mount), so that runs never meet.
	bare := bpftest.Cgroup(b)
	ns.AddAddr(b, "10.1.0.1/32")
	var slots []uint32
	for i := uint32(1); i <= 10; i++ {
		h.backend(i, "10.1.0.1:8080/UDP", lb.BackendActive)
		slots = append(slots, i)
	}
	h.frontend(testFrontend{addr: "10.96.0.10:53/UDP", id: 1, slots: slots})
	b.ResetTimer()
	lines := bpftest.RunClient(b, cg, ns, fmt.Sprintf("connect 10.96.0.10:53 10.1.0.1:8080 %d %s %s", b.N, cg, bare))
	b.StopTimer()
	var with, without, closeWith, closeWithout float64
	if _, err := fmt.Sscanf(lines[0], "ns %g %g %g %g", &with, &without, &closeWith, &closeWithout); err != nil {
		b.Fatalf("client said %q: %v", lines, err)
	}
	b.ReportMetric(with, "ns/connect")
	b.ReportMetric(without, "ns/connect-bare")
	b.ReportMetric(with-without, "ns/overhead")
	b.ReportMetric(closeWith-closeWithout, "ns/close-overhead")
}

// BenchmarkDatapathCalibration times, the same way as BenchmarkDatapath,
// what the datapath's costs are made of on this machine: an empty tc
// program, one lookup of a 40-byte key in a hash map (the same key every
// run, as an established flow's conntrack lookup), and one insert of a new
// 40-byte key into an LRU map (as each of a new flow's two conntrack
// entries) of 131,072 entries, full after as many runs. The others price
// the ways a new flow's inserts could go: into an LRU map with per-CPU
// lists (BPF_F_NO_COMMON_LRU), as full; and, as
// BenchmarkDatapathNewFlowUnfilled's lb_ct, into an LRU map and a
// preallocated hash map that never fill (eight times the runs).
func BenchmarkDatapathCalibration(b *testing.B) {
	bpftest.Require(b)
	for _, c := range []struct {
		name     string
		typ      ebpf.MapType
		flags    uint32
		op       asm.BuiltinFunc
		unfilled bool
	}{
		{"empty", 0, 0, 0, false},
		{"hash-lookup", ebpf.Hash, 0, asm.FnMapLookupElem, false},
		{"lru-insert", ebpf.LRUHash, 0, asm.FnMapUpdateElem, false},
		{"lru-percpu-insert", ebpf.LRUHash, unix.BPF_F_NO_COMMON_LRU, asm.FnMapUpdateElem, false},
		{"lru-insert-unfilled", ebpf.LRUHash, 0, asm.FnMapUpdateElem, true},
		{"hash-insert-unfilled", ebpf.Hash, 0, asm.FnMapUpdateElem, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			insns := asm.Instructions{asm.Mov.Imm(asm.R0, 0)}
			if c.op != 0 {
				size := uint32(1 << 17)
				if c.unfilled {
					size = uint32(max(8*b.N, 1<<17))
				}
				m, err := ebpf.NewMap(&ebpf.MapSpec{Type: c.typ, Flags: c.flags, KeySize: 40, ValueSize: 16, MaxEntries: size})
				if err != nil {
					b.Fatal(err)
				}
				defer m.Close()
				// Key at fp-40, value at fp-56, zero but for a random word
				// of the key when inserting.
				insns = asm.Instructions{asm.Mov.Imm(asm.R7, 0)}
				for off := int16(-56); off < 0; off += 8 {
					insns = append(insns, asm.StoreMem(asm.RFP, off, asm.R7, asm.DWord))
				}
				if c.op == asm.FnMapUpdateElem {
					insns = append(insns, asm.FnGetPrandomU32.Call(), asm.StoreMem(asm.RFP, -40, asm.R0, asm.Word))
				}
				insns = append(insns,
					asm.LoadMapPtr(asm.R1, m.FD()),
					asm.Mov.Reg(asm.R2, asm.RFP), asm.Add.Imm(asm.R2, -40),
					asm.Mov.Reg(asm.R3, asm.RFP), asm.Add.Imm(asm.R3, -56),
					asm.Mov.Imm(asm.R4, 0),
					c.op.Call(),
					asm.Mov.Imm(asm.R0, 0),
				)
			}
			p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, Instructions: append(insns, asm.Return()), License: "GPL"})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			b.ResetTimer()
			_, perRun, err := p.Benchmark(make([]byte, 64), b.N, b.ResetTimer)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(perRun.Nanoseconds()), "ns/run")
		})
	}
}
