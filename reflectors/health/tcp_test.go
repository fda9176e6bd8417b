package health

import (
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
	for _, when := range []string{"before", "during"} {
		done := make(chan error, 1)
		go func() {
			done <- tcpProber{}.probe(to, 30*time.Second, func(abort func()) func() bool {
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
