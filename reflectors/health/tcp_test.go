package health

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A TCP connection from a port to itself (what a probe gets when the
// kernel picks the very port nobody listens on as its source) is told
// apart from a real one.
func TestSelfConnectionIsToldApart(t *testing.T) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	port := sa.(*unix.SockaddrInet4).Port
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("connecting to itself: %v", err)
	}
	self := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port))
	if !selfConnected(fd, self) {
		t.Error("a connection to itself is not told apart")
	}
	if selfConnected(fd, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port+1))) {
		t.Error("a connection elsewhere counts as to itself")
	}
}

// A TCP probe aborted before its connect(2) begins (its backend went
// while the probe waited for a worker, or it started past its deadline)
// ends at once. Shutting down a socket that is not connecting yet does
// nothing, and the connect that followed once ran to its timeout, so
// that a deleted service's probe held its slot for it.
func TestTCPProbeAbortedBeforeItConnectsEndsAtOnce(t *testing.T) {
	to := hangingAddr(t).AddrPort()
	poller, err := newConnectPoller(1)
	if err != nil {
		t.Fatal(err)
	}
	defer poller.close()
	prober := newTCPProber(poller, 0)
	for _, when := range []string{"before", "during"} {
		done := make(chan error, 1)
		go func() {
			done <- prober.probe(to, 30*time.Second, func(abort func()) func() bool {
				if when == "before" {
					abort()
					return func() bool { return false }
				}
				timer := time.AfterFunc(50*time.Millisecond, abort)
				return timer.Stop
			})
		}()
		select {
		case err := <-done:
			if _, ok := err.(timeoutError); !ok {
				t.Errorf("aborted %s connecting: %v, want a timeout error", when, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("a probe aborted %s connecting still runs after 10s", when)
		}
	}
}

// A TCP probe whose connect does not end in the call (its SYN dropped,
// as a backend a round trip away is not there yet) waits in the poller
// and passes once the backend answers: here the listener's full queue
// drops the first SYN, and its retransmission, a second later, finds
// room.
func TestTCPProbeWaitsForItsConnectUnderWay(t *testing.T) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil { // a queue of one
		t.Fatal(err)
	}
	sa, _ := unix.Getsockname(fd)
	port := sa.(*unix.SockaddrInet4).Port
	filler, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(filler)
	if err := unix.Connect(filler, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}

	poller, err := newConnectPoller(1)
	if err != nil {
		t.Fatal(err)
	}
	defer poller.close()
	p := newTCPProber(poller, 0)
	defer p.close()
	// First a probe that passes at once: the reset it ends with must not
	// leave an error on the socket that wakes the next wait (it would
	// then spin until the handshake).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := p.probe(netip.MustParseAddrPort(ln.Addr().String()), time.Minute, nil); err != nil {
		t.Fatalf("a probe of a listener: %v", err)
	}
	waiting := make(chan struct{}, 100)
	done := make(chan error, 1)
	go func() {
		done <- p.probe(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port)), time.Minute,
			func(abort func()) func() bool {
				waiting <- struct{}{}
				return func() bool { return true }
			})
	}()
	select {
	case <-waiting:
	case err := <-done:
		t.Fatalf("the probe ended (%v) while its SYN was dropped", err)
	}
	conn, _, err := unix.Accept(fd) // room for the SYN's retransmission
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(conn)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("a probe answered after a retransmitted SYN failed: %v", err)
		}
		if n := 1 + len(waiting); n != 1 {
			t.Errorf("the probe waited %d times for one handshake", n)
		}
	case <-time.After(10 * time.Second): // a guard: the SYN is sent again after 1s
		t.Fatal("a probe waiting for its connect was not woken by the handshake")
	}
}

// A TCP prober keeps its socket from probe to probe (reset, not closed),
// and the next probe on it says what that backend does, whatever the
// one before saw: a stale error of the last reset or refusal never
// passes to the next.
func TestTCPProberReusesItsSocketAndEachProbeSaysItsOwnResult(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	open := netip.MustParseAddrPort(ln.Addr().String())
	refusing := refusingAddr(t).AddrPort()
	poller, err := newConnectPoller(1)
	if err != nil {
		t.Fatal(err)
	}
	defer poller.close()
	p := newTCPProber(poller, 0)
	defer p.close()
	noWait := func(func()) func() bool { return func() bool { return true } }
	var fd int
	for i, to := range []netip.AddrPort{open, open, refusing, open, refusing, refusing, open} {
		err := p.probe(to, time.Minute, noWait)
		if want := to == open; (err == nil) != want {
			t.Fatalf("probe %d of %s: %v", i, to, err)
		}
		if to == refusing && !errors.Is(err, unix.ECONNREFUSED) {
			t.Fatalf("probe %d of %s: %v, want connection refused", i, to, err)
		}
		if i == 0 {
			fd = p.socks[0]
		}
		if p.socks[0] != fd || fd < 0 {
			t.Fatalf("probe %d: socket %d, want the first probe's, %d, kept", i, p.socks[0], fd)
		}
	}
}

// A TCP probe is half-open: it passes on the backend's SYN-ACK and resets
// before the handshake's last ACK, so the backend's kernel never makes a
// connection for its program to accept (a full handshake queued one per
// probe, and woke the program to accept and close it).
func TestTCPProbeLeavesTheBackendNoConnectionToAccept(t *testing.T) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 128); err != nil {
		t.Fatal(err)
	}
	sa, _ := unix.Getsockname(fd)
	to := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(sa.(*unix.SockaddrInet4).Port))
	poller, err := newConnectPoller(1)
	if err != nil {
		t.Fatal(err)
	}
	defer poller.close()
	p := newTCPProber(poller, 0)
	defer p.close()
	for i := range 10 {
		if err := p.probe(to, time.Minute, func(func()) func() bool { return func() bool { return true } }); err != nil {
			t.Fatalf("probe %d of a listener: %v", i, err)
		}
	}
	if conn, _, err := unix.Accept(fd); err != unix.EAGAIN {
		unix.Close(conn)
		t.Errorf("after 10 probes the backend had a connection to accept (accept: %v), want none", err)
	}
}
