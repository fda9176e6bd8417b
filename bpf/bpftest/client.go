package bpftest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// clientEnv carries a client's script to the re-executed test binary.
const clientEnv = "LBSTATE_TEST_CLIENT"

// RunClient connects to servers as a process of the cgroup cg (none if
// cg is empty), inside the network namespace ns, so that socket programs
// attached to cg act on its sockets and on no one else's. It runs the test binary again (the
// package's TestMain must call MaybeClient first) with a script of lines:
//
//	tcp ADDR:PORT N      N connections, each reading the server's name
//	                     (or printing "refused ADDR:PORT")
//	tcpfrom SRC ADDR:PORT N
//	                     the same from sockets bound to address SRC
//	tcpwait TIMEOUT ADDR:PORT N
//	                     the same with a connect timeout (a Go duration),
//	                     printing "timeout ADDR:PORT" when it runs out
//	udp ADDR:PORT N      N sockets, each sending one datagram
//	udp1 ADDR:PORT N     one socket sending N datagrams
//	udpc ADDR:PORT N     N connected UDP sockets, each sending one
//	ports P              the UDP sockets of the lines after it (udp,
//	                     udp1, udpc) bind to source ports P, P+1, ...
//	                     instead of ephemeral ones
//	udpwait A1 A2        two connected UDP sockets, to A1 and A2, each
//	                     exchanging a datagram; then the first waits (10
//	                     s) for an error, printing "first ERROR" or "first
//	                     alive", and the second exchanges another,
//	                     printing "second NAME" or "second ERROR"
//	connect A1 A2 N CG1 CG2
//	                     N connect()s of UDP sockets created in cgroup CG1
//	                     to A1, and N of sockets created in CG2 to A2,
//	                     interleaved (no packet is sent); prints "ns T1 T2
//	                     C1 C2", the median time of a connect() syscall of
//	                     each, and of a close() of the sockets
//	connecttcp A1 A2 N CG1 CG2
//	                     the same with TCP sockets: each connect() is a
//	                     handshake with a listener, and each socket is
//	                     closed with a reset (no TIME_WAIT left)
//	udprace ADDR:PORT N D
//	                     N unconnected UDP sockets, each sending one
//	                     datagram; then two threads on two CPUs send
//	                     from all N in turn for D (a Go duration), no
//	                     answer read; prints "sent N1 N2" (udprace.go)
//
// Each exchange prints "NAME PEER", where NAME is what the server answered
// and PEER whom the socket says it talked to (getpeername, or the source
// of the reply); RunClient returns those lines.
func RunClient(t testing.TB, cg string, ns *Netns, script ...string) []string {
	t.Helper()
	lines, err := runClient(cg, ns, script)
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// RunClients runs clients (RunClient's) at once, each with one script,
// and returns their lines, in no particular order.
func RunClients(t testing.TB, cg string, ns *Netns, scripts ...string) []string {
	t.Helper()
	var (
		mu    sync.Mutex
		lines []string
		errs  []error
		wg    sync.WaitGroup
	)
	for _, s := range scripts {
		wg.Go(func() {
			got, err := runClient(cg, ns, []string{s})
			mu.Lock()
			defer mu.Unlock()
			lines = append(lines, got...)
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	return lines
}

func runClient(cg string, ns *Netns, script []string) ([]string, error) {
	var cgDir *os.File
	if cg != "" {
		var err error
		if cgDir, err = os.Open(cg); err != nil {
			return nil, err
		}
		defer cgDir.Close()
	}
	nsFile, err := ns.File()
	if err != nil {
		return nil, err
	}
	defer nsFile.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), clientEnv+"="+strings.Join(script, ";"))
	cmd.ExtraFiles = []*os.File{nsFile} // fd 3
	if cgDir != nil {
		cmd.SysProcAttr = &unix.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cgDir.Fd())}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		// Which exchange failed says more than that one did.
		done := strings.Count(stdout.String(), "\n")
		return nil, fmt.Errorf("client %q: %v, after %d exchanges\n%s", script, err, done, stderr.String())
	}
	return strings.Split(strings.TrimSpace(stdout.String()), "\n"), nil
}

// MaybeClient runs the client of RunClient and exits when the process is
// one; call it first thing in TestMain.
func MaybeClient() {
	script, ok := os.LookupEnv(clientEnv)
	if !ok {
		return
	}
	// Sockets are created in the network namespace of the thread that
	// creates them: enter it on this thread, and stay on it.
	runtime.LockOSThread()
	if err := unix.Setns(3, unix.CLONE_NEWNET); err != nil {
		fmt.Fprintln(os.Stderr, "entering the network namespace:", err)
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	var src udpSource
	for _, line := range strings.Split(script, ";") {
		if err := runClientLine(out, line, &src); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", line, err)
			out.Flush()
			os.Exit(1)
		}
	}
	out.Flush()
	os.Exit(0)
}

// udpSource gives the source addresses of a client's UDP sockets: an
// ephemeral port each, or, after a ports line, the next of its ports.
type udpSource struct{ next int }

func (s *udpSource) addr() *net.UDPAddr {
	if s.next == 0 {
		return nil
	}
	s.next++
	return &net.UDPAddr{Port: s.next - 1}
}

func runClientLine(out *bufio.Writer, line string, src *udpSource) error {
	if rest, ok := strings.CutPrefix(line, "ports "); ok {
		p, err := strconv.Atoi(rest)
		if err != nil || p <= 0 || p > math.MaxUint16 {
			return fmt.Errorf("bad first port %q", rest)
		}
		src.next = p
		return nil
	}
	if op, rest, _ := strings.Cut(line, " "); op == "connect" || op == "connecttcp" {
		var a1, a2, cg1, cg2 string
		var n int
		if _, err := fmt.Sscan(rest, &a1, &a2, &n, &cg1, &cg2); err != nil {
			return err
		}
		return timeConnects(out, a1, a2, n, cg1, cg2, op == "connecttcp")
	}
	if rest, ok := strings.CutPrefix(line, "udprace "); ok {
		var to, d string
		var n int
		if _, err := fmt.Sscan(rest, &to, &n, &d); err != nil {
			return err
		}
		dur, err := time.ParseDuration(d)
		if err != nil {
			return err
		}
		return udpRace(out, to, n, dur)
	}
	if rest, ok := strings.CutPrefix(line, "udpwait "); ok {
		var a1, a2 string
		if _, err := fmt.Sscan(rest, &a1, &a2); err != nil {
			return err
		}
		return udpWait(out, a1, a2)
	}
	dialer := net.Dialer{Timeout: 5 * time.Second}
	tolerant := false
	if rest, ok := strings.CutPrefix(line, "tcpwait "); ok {
		d, rest, _ := strings.Cut(rest, " ")
		timeout, err := time.ParseDuration(d)
		if err != nil {
			return err
		}
		dialer.Timeout, tolerant, line = timeout, true, "tcp "+rest
	}
	if rest, ok := strings.CutPrefix(line, "tcpfrom "); ok {
		src, rest, _ := strings.Cut(rest, " ")
		ip, err := netip.ParseAddr(src)
		if err != nil {
			return err
		}
		dialer.LocalAddr = &net.TCPAddr{IP: ip.AsSlice()}
		line = "tcp " + rest
	}
	var op, to string
	var n int
	if _, err := fmt.Sscan(line, &op, &to, &n); err != nil {
		return err
	}
	dst, err := net.ResolveUDPAddr("udp", to) // an address literal: no lookup
	if err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	var one *net.UDPConn
	for range n {
		switch op {
		case "tcp":
			c, err := dialer.Dial("tcp", to)
			if errors.Is(err, unix.ECONNREFUSED) {
				fmt.Fprintln(out, "refused", to)
				continue
			}
			var ne net.Error
			if tolerant && errors.As(err, &ne) && ne.Timeout() {
				fmt.Fprintln(out, "timeout", to)
				continue
			}
			if err != nil {
				return err
			}
			c.SetDeadline(deadline)
			name, err := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if err != nil {
				return err
			}
			fmt.Fprintln(out, strings.TrimSpace(name), c.RemoteAddr())
		case "udp", "udp1":
			if one == nil {
				if one, err = net.ListenUDP("udp", src.addr()); err != nil {
					return err
				}
			}
			one.SetDeadline(deadline)
			buf := make([]byte, 256)
			_, err := one.WriteToUDP([]byte("hello"), dst)
			m, from := 0, (*net.UDPAddr)(nil)
			if err == nil {
				m, from, err = one.ReadFromUDP(buf)
			}
			if op == "udp" || err != nil {
				one.Close()
				one = nil
			}
			if err != nil {
				return err
			}
			fmt.Fprintln(out, string(buf[:m]), from)
		case "udpc":
			c, err := net.DialUDP("udp", src.addr(), dst)
			if err != nil {
				return err
			}
			c.SetDeadline(deadline)
			buf := make([]byte, 256)
			_, err = c.Write([]byte("hello"))
			m := 0
			if err == nil {
				m, err = c.Read(buf)
			}
			c.Close()
			if err != nil {
				return err
			}
			fmt.Fprintln(out, string(buf[:m]), c.RemoteAddr())
		default:
			return fmt.Errorf("unknown operation %q", op)
		}
	}
	if one != nil {
		one.Close()
	}
	return nil
}

// ServeName serves, inside ns until the test ends, TCP and UDP on
// addr:port: a TCP connection is sent name and a newline, and again for
// every line it sends; a datagram is answered with name.
func ServeName(t testing.TB, ns *Netns, addr string, port int, name string) {
	t.Helper()
	hostPort := net.JoinHostPort(addr, strconv.Itoa(port))
	var (
		tl net.Listener
		ul net.PacketConn
	)
	err := ns.Do(func() (err error) {
		if tl, err = net.Listen("tcp", hostPort); err != nil {
			return err
		}
		ul, err = net.ListenPacket("udp", hostPort)
		return err
	})
	if err != nil {
		t.Fatalf("serving %s: %v", hostPort, err)
	}
	t.Cleanup(func() { tl.Close(); ul.Close() })
	go func() {
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					if _, err := c.Write([]byte(name + "\n")); err != nil {
						return
					}
					if _, err := r.ReadString('\n'); err != nil {
						return
					}
				}
			}()
		}
	}()
	go func() {
		buf := make([]byte, 256)
		for {
			_, from, err := ul.ReadFrom(buf)
			if err != nil {
				return
			}
			ul.WriteTo([]byte(name), from)
		}
	}()
}

// timeConnects times connect() calls of UDP (with tcp, TCP) sockets: to a1 from sockets
// created in cgroup cg1, and to a2 from sockets created in cg2 (programs
// act on a socket by the cgroup it was created in), interleaved so that
// whatever else the CPUs do weighs on both alike, and the median of
// each, which preemptions do not move; and the close() of each socket
// the same way. Socket creation and moving between cgroups are not
// timed.
func timeConnects(out *bufio.Writer, a1, a2 string, n int, cg1, cg2 string, tcp bool) error {
	typ := unix.SOCK_DGRAM
	if tcp {
		typ = unix.SOCK_STREAM
	}
	var sa [2]unix.Sockaddr
	var family [2]int
	for i, a := range []string{a1, a2} {
		ap, err := netip.ParseAddrPort(a)
		if err != nil {
			return err
		}
		family[i], sa[i] = unix.AF_INET6, &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
		if ap.Addr().Is4() {
			family[i], sa[i] = unix.AF_INET, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
		}
	}
	const chunk = 256
	var took, closed [2][]time.Duration
	for done := 0; done < n; done += chunk {
		m := min(chunk, n-done)
		var fds [2][]int
		for i, cg := range []string{cg1, cg2} {
			if err := os.WriteFile(cg+"/cgroup.procs", []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
				return err
			}
			for range m {
				fd, err := unix.Socket(family[i], typ|unix.SOCK_CLOEXEC, 0)
				if err != nil {
					return err
				}
				fds[i] = append(fds[i], fd)
			}
		}
		for j := range m {
			for i := range 2 {
				start := time.Now()
				err := unix.Connect(fds[i][j], sa[i])
				took[i] = append(took[i], time.Since(start))
				if err != nil {
					return err
				}
			}
		}
		for j := range m {
			for i := range 2 {
				if tcp {
					unix.SetsockoptLinger(fds[i][j], unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
				}
				start := time.Now()
				unix.Close(fds[i][j])
				closed[i] = append(closed[i], time.Since(start))
			}
		}
	}
	for i := range 2 {
		slices.Sort(took[i])
		slices.Sort(closed[i])
	}
	fmt.Fprintln(out, "ns", took[0][n/2].Nanoseconds(), took[1][n/2].Nanoseconds(), closed[0][n/2].Nanoseconds(), closed[1][n/2].Nanoseconds())
	return nil
}

// CheckWeights checks RunClient's exchanges: that they all show peer, and
// that each server bN (b1, b2, ...) answered its weight's share of them,
// within five standard deviations (none for a weight of 0).
func CheckWeights(t testing.TB, what string, lines []string, peer string, weights ...uint16) {
	t.Helper()
	counts := map[string]int{}
	for _, l := range lines {
		name, got, _ := strings.Cut(l, " ")
		if got != peer {
			t.Fatalf("%s: the client saw %q, not the frontend %s", what, l, peer)
		}
		counts[name]++
	}
	var sum float64
	for _, w := range weights {
		sum += float64(w)
	}
	n := float64(len(lines))
	for i, w := range weights {
		want, got := float64(w)/sum, float64(counts[fmt.Sprintf("b%d", i+1)])/n
		if sigma := math.Sqrt(want * (1 - want) / n); math.Abs(got-want) > 5*sigma+1e-9 {
			t.Errorf("%s: b%d took %.1f%% of %d, want %.1f%% (weights %v): %v", what, i+1, 100*got, len(lines), 100*want, weights, counts)
		}
	}
}

// udpWait runs a udpwait line: see RunClient.
func udpWait(out *bufio.Writer, a1, a2 string) error {
	var conns [2]*net.UDPConn
	buf := make([]byte, 256)
	for i, a := range []string{a1, a2} {
		dst, err := net.ResolveUDPAddr("udp", a)
		if err != nil {
			return err
		}
		if conns[i], err = net.DialUDP("udp", nil, dst); err != nil {
			return err
		}
		defer conns[i].Close()
		conns[i].SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := conns[i].Write([]byte("hello")); err != nil {
			return err
		}
		if _, err := conns[i].Read(buf); err != nil {
			return err
		}
	}
	conns[0].SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conns[0].Read(buf); errors.Is(err, os.ErrDeadlineExceeded) {
		fmt.Fprintln(out, "first alive")
	} else {
		fmt.Fprintln(out, "first", err)
	}
	conns[1].SetDeadline(time.Now().Add(5 * time.Second))
	_, err := conns[1].Write([]byte("hello"))
	m := 0
	if err == nil {
		m, err = conns[1].Read(buf)
	}
	if err != nil {
		fmt.Fprintln(out, "second", err)
	} else {
		fmt.Fprintln(out, "second", string(buf[:m]))
	}
	return nil
}
