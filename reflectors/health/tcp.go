package health

import (
	"errors"
	"net/netip"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// tcpProber connects and closes at once, with a blocking connect(2) on a
// raw socket rather than net.Dialer: at thousands of probes a second the
// dialer's poller registration, keepalive options and address lookups
// cost more than the handshake. A blocking connect holds a thread for a
// round trip, so --health-max-concurrent bounds the threads too; the
// kernel ends it at the timeout (SO_SNDTIMEO) even if nothing else does.
//
// It closes with a reset (SO_LINGER 0), as health checkers do, so that
// probes leave no connection in TIME_WAIT on this node: at thousands of
// probes a second those would use up its ports.
type tcpProber struct{}

// probe connects to to, and gives up when abortAt's call comes (the
// probe's timeout, on the checker's clock): it shuts the socket down,
// which ends a connect under way.
func (tcpProber) probe(to netip.AddrPort, timeout time.Duration, abortAt func(func()) func() bool) error {
	family, sa := sockaddr(to)
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	tv := unix.NsecToTimeval(timeout.Nanoseconds())
	if err := unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1}); err == nil {
		err = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	}
	if err != nil {
		unix.Close(fd)
		return os.NewSyscallError("setsockopt", err)
	}
	var mu sync.Mutex // the fd is not shut down once closed (and perhaps reused)
	open, aborted, connecting := true, false, false
	// shut ends a connect under way; false if there was none to end yet
	// (shutdown(2) of a socket not yet connecting does nothing, and the
	// connect that follows would run to SO_SNDTIMEO). mu is held.
	shut := func() bool {
		return !open || unix.Shutdown(fd, unix.SHUT_RDWR) != unix.ENOTCONN
	}
	stop := abortAt(func() {
		mu.Lock()
		aborted = true
		done := !connecting || shut() // not connecting: it is seen below
		mu.Unlock()
		if done {
			return
		}
		go func() { // connect(2) has not started yet: until it has
			for {
				time.Sleep(time.Millisecond)
				mu.Lock()
				done := shut()
				mu.Unlock()
				if done {
					return
				}
			}
		}()
	})
	mu.Lock()
	if aborted { // before the connect: a probe ended (its backend gone) or late
		open = false
		unix.Close(fd)
		mu.Unlock()
		stop()
		return timeoutError{timeout}
	}
	connecting = true
	mu.Unlock()
	err = unix.Connect(fd, sa)
	stop()
	self := err == nil && selfConnected(fd, to)
	mu.Lock()
	open = false
	unix.Close(fd)
	timedOut := aborted || err == unix.EAGAIN || err == unix.EINPROGRESS // SO_SNDTIMEO
	mu.Unlock()
	switch {
	case err == nil && self:
		return errSelfConnected
	case err == nil:
		return nil
	case timedOut:
		return timeoutError{timeout}
	}
	return os.NewSyscallError("connect", err)
}

// errSelfConnected is a probe that reached itself: with nobody listening
// on a local port, the kernel may pick that very port as the probe's
// source, and a TCP connection to oneself succeeds ("simultaneous
// open"). It passed nothing.
var errSelfConnected = errors.New("connect: connected to itself: nothing listens")

// selfConnected reports whether the socket fd, connected to to, is
// connected from to itself.
func selfConnected(fd int, to netip.AddrPort) bool {
	local, err := unix.Getsockname(fd)
	if err != nil {
		return false
	}
	switch l := local.(type) {
	case *unix.SockaddrInet4:
		return l.Port == int(to.Port()) && l.Addr == to.Addr().As4()
	case *unix.SockaddrInet6:
		return l.Port == int(to.Port()) && l.Addr == to.Addr().As16()
	}
	return false
}

func sockaddr(to netip.AddrPort) (family int, sa unix.Sockaddr) {
	if to.Addr().Is4() {
		return unix.AF_INET, &unix.SockaddrInet4{Port: int(to.Port()), Addr: to.Addr().As4()}
	}
	return unix.AF_INET6, &unix.SockaddrInet6{Port: int(to.Port()), Addr: to.Addr().As16()}
}
