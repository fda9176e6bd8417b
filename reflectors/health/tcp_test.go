package health

import (
	"net/netip"
	"testing"

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
