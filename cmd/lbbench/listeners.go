package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// listenersEnv, set in a child's environment, makes lbbench a process of
// loopback listeners for -health ("IP,COUNT"): the backends. They live in
// other processes so that their CPU (accepting) is not counted as the
// prober's, and so that each process stays under its file limit.
const listenersEnv = "LBBENCH_HEALTH_LISTENERS"

// perProcess is how many listeners one child holds, under the usual
// limit of 20,000 open files.
const perProcess = 15000

// firstPort is the first port listeners try.
const firstPort = 10000

// serveListeners is the child: it listens on COUNT ports of IP, prints
// each address and then "ready", accepts and closes connections, and
// closes a listener when stdin says "close ADDR" (answering "closed
// ADDR"), until stdin ends.
func serveListeners(spec string) error {
	ip, count, _ := strings.Cut(spec, ",")
	n, err := strconv.Atoi(count)
	if err != nil {
		return fmt.Errorf("%s=%q: %w", listenersEnv, spec, err)
	}
	raiseFileLimit()
	out := bufio.NewWriter(os.Stdout)
	lns := map[string]net.Listener{}
	// Plain TCP, as most backends are: Go's listeners use MPTCP by
	// default, whose handshake costs the kernel more, on the prober's
	// side of loopback too.
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	// Ports from firstPort up, below the ephemeral range: picking free
	// ports for 100,000 listeners is slow in the kernel, and probes'
	// source ports never collide with these.
	port := firstPort
	for range n {
		var ln net.Listener
		for ; ln == nil && port < 32768; port++ {
			ln, err = lc.Listen(context.Background(), "tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
		}
		if ln == nil {
			return fmt.Errorf("no free port for listener on %s: %w", ip, err)
		}
		lns[ln.Addr().String()] = ln
		fmt.Fprintln(out, ln.Addr())
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
	fmt.Fprintln(out, "ready")
	out.Flush()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if addr, ok := strings.CutPrefix(in.Text(), "close "); ok {
			if ln := lns[addr]; ln != nil {
				ln.Close()
			}
			fmt.Fprintln(out, "closed", addr)
			out.Flush()
		}
	}
	return nil
}

// listenerGroup is the children that hold the benchmark's backends.
type listenerGroup struct {
	addrs []string
	procs []*listenerProc
	owner map[string]*listenerProc
}

type listenerProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
	mu  sync.Mutex
}

// startListeners starts children holding n listeners, on 127.0.0.1,
// 127.0.0.2, ... (perProcess on each address).
func startListeners(n int) (*listenerGroup, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	g := &listenerGroup{owner: map[string]*listenerProc{}}
	for i := 0; n > 0; i++ {
		count := min(n, perProcess)
		n -= count
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=127.0.0.%d,%d", listenersEnv, i+1, count))
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		p := &listenerProc{cmd: cmd, in: in, out: bufio.NewScanner(stdout)}
		g.procs = append(g.procs, p)
		for p.out.Scan() && p.out.Text() != "ready" {
			g.addrs = append(g.addrs, p.out.Text())
			g.owner[p.out.Text()] = p
		}
		if err := p.out.Err(); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// close closes the listener at addr and returns once it is closed: the
// backend refuses connections from then on.
func (g *listenerGroup) close(addr string) (time.Time, error) {
	p := g.owner[addr]
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := fmt.Fprintln(p.in, "close", addr); err != nil {
		return time.Time{}, err
	}
	if !p.out.Scan() || p.out.Text() != "closed "+addr {
		return time.Time{}, fmt.Errorf("listener %s: no confirmation (%q)", addr, p.out.Text())
	}
	return time.Now(), nil
}

// cpu returns the children's CPU time so far, from /proc.
func (g *listenerGroup) cpu() time.Duration {
	var total time.Duration
	for _, p := range g.procs {
		total += procCPU(p.cmd.Process.Pid)
	}
	return total
}

func (g *listenerGroup) stop() {
	for _, p := range g.procs {
		p.in.Close()
		p.cmd.Wait()
	}
}

// procCPU is a process's user and system time (/proc/PID/stat fields 14
// and 15, in clock ticks of 1/100 s).
func procCPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// selfCPU is this process's user and system time.
func selfCPU() (user, sys time.Duration) {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// raiseFileLimit raises the soft limit on open files to the hard one
// (Go does so at start too; this says so where it matters).
func raiseFileLimit() {
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil && rl.Cur < rl.Max {
		rl.Cur = rl.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	}
}

// runDelays is each of this process's threads' time spent waiting for a
// CPU while runnable (/proc/self/task/TID/schedstat, second field, in
// ns): how much the machine's other work held the prober back.
func runDelays() map[string]time.Duration {
	out := map[string]time.Duration{}
	tids, _ := os.ReadDir("/proc/self/task")
	for _, tid := range tids {
		data, err := os.ReadFile("/proc/self/task/" + tid.Name() + "/schedstat")
		if err != nil {
			continue
		}
		if f := strings.Fields(string(data)); len(f) >= 2 {
			ns, _ := strconv.ParseInt(f[1], 10, 64)
			out[tid.Name()] = time.Duration(ns)
		}
	}
	return out
}

// runDelaySince sums the run delays of the threads in both snapshots
// (threads come and go: one that left took its count with it).
func runDelaySince(before, after map[string]time.Duration) time.Duration {
	var sum time.Duration
	for tid, d := range after {
		if d0, ok := before[tid]; ok {
			sum += d - d0
		}
	}
	return sum
}
