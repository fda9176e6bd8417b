package bpf_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// BenchmarkSockOpsConnect times what lb_sock_ops adds to a TCP connect()
// through socket LB: a blocking connect() to a frontend, whose backend
// listens on a loopback address of a network namespace of the test's
// own, from a cgroup with the socket programs and lb_sock_ops (reports
// on, drained as the agent does) against one with the socket programs
// alone, interleaved, medians (ns/overhead is their difference, within
// the handshake's noise); then, in a second pass, the kernel's own
// run-time statistics of lb_sock_ops (ns/sockops-per-connect: every
// invocation of it a connect causes, runs/connect of them, each with the
// statistics' own two clock reads).
//
// empty is the floor: the same with an empty sock_ops program instead of
// lb_sock_ops, what the kernel's calls of any sock_ops program cost.
func BenchmarkSockOpsConnect(b *testing.B) {
	b.Run("lb_sock_ops", func(b *testing.B) { benchSockOps(b, false) })
	b.Run("empty", func(b *testing.B) { benchSockOps(b, true) })
}

func benchSockOps(b *testing.B, empty bool) {
	h := newDatapathOptions(b, dpConfig(), bpf.DatapathOptions{CTTimeouts: bpf.DefaultCTTimeouts, ConnectionReports: !empty})
	bare, err := bpf.LoadDatapathOptions(h.maps, bpf.DatapathOptions{CTTimeouts: bpf.DefaultCTTimeouts})
	if err != nil {
		b.Fatal(err)
	}
	defer bare.Close()
	ns, cgWith, cgWithout := bpftest.NewNetns(b), bpftest.Cgroup(b), bpftest.Cgroup(b)
	if err := h.dp.AttachCgroup(cgWith); err != nil {
		b.Fatal(err)
	}
	prog := h.dp.Program("lb_sock_ops")
	if empty {
		prog = emptySockOps(b, cgWith)
	}
	if err := bare.AttachCgroup(cgWithout); err != nil {
		b.Fatal(err)
	}
	ns.AddAddr(b, "10.1.0.1/32")
	bpftest.ServeName(b, ns, "10.1.0.1", 8080, "b1")
	h.backend(1, "10.1.0.1:8080/TCP", lb.BackendActive)
	h.frontend(testFrontend{addr: "10.96.0.10:80/TCP", id: 1, slots: []uint32{1}})
	if empty {
		client := fmt.Sprintf("connecttcp 10.96.0.10:80 10.96.0.10:80 %d %s %s", b.N, cgWith, cgWithout)
		b.ResetTimer()
		lines := bpftest.RunClient(b, cgWith, ns, client)
		b.StopTimer()
		reportConnects(b, lines)
		return
	}
	r := connReader(b, h)
	var drained atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			events, err := r.Read(nil, time.Now().Add(50*time.Millisecond))
			drained.Add(int64(len(events)))
			if err != nil {
				return
			}
		}
	}()
	client := fmt.Sprintf("connecttcp 10.96.0.10:80 10.96.0.10:80 %d %s %s", b.N, cgWith, cgWithout)
	b.ResetTimer()
	lines := bpftest.RunClient(b, cgWith, ns, client)
	b.StopTimer()
	// Again with the kernel's run-time statistics on, which cost every
	// run of every program two clock reads: not in the medians above.
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Fatal(err)
	}
	defer stats.Close()
	before, err := prog.Stats()
	if err != nil {
		b.Fatal(err)
	}
	bpftest.RunClient(b, cgWith, ns, client)
	after, err := prog.Stats()
	if err != nil {
		b.Fatal(err)
	}
	stats.Close()
	for deadline := time.Now().Add(5 * time.Second); drained.Load() < 2*int64(b.N) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // polling the reader's count, with a deadline
	}
	r.Close()
	<-done
	if n := drained.Load(); n != 2*int64(b.N) {
		b.Errorf("%d reports of %d connects", n, b.N)
	}
	reportConnects(b, lines)
	b.ReportMetric(float64((after.Runtime-before.Runtime).Nanoseconds())/float64(b.N), "ns/sockops-per-connect")
	b.ReportMetric(float64(after.RunCount-before.RunCount)/float64(b.N), "runs/connect")
}

func reportConnects(b *testing.B, lines []string) {
	var with, without float64
	if _, err := fmt.Sscanf(lines[0], "ns %g %g", &with, &without); err != nil {
		b.Fatalf("client said %q: %v", lines, err)
	}
	b.ReportMetric(with, "ns/connect")
	b.ReportMetric(without, "ns/connect-bare")
	b.ReportMetric(with-without, "ns/overhead")
}

// emptySockOps attaches a sock_ops program that only returns to cg.
func emptySockOps(b *testing.B, cg string) *ebpf.Program {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SockOps, License: "Apache-2.0",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 1), asm.Return()}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { prog.Close() })
	l, err := link.AttachCgroup(link.CgroupOptions{Path: cg, Attach: ebpf.AttachCGroupSockOps, Program: prog})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return prog
}
