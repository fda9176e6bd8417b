package health

import (
	"errors"
	"net/netip"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// tcpProber is one worker's TCP prober: it connects and resets at once,
// half-open (see socket), with a non-blocking connect(2) on a raw socket rather than net.Dialer
// (at thousands of probes a second the dialer's poller registration,
// keepalive options and address lookups cost more than the handshake).
// Where the handshake ends within the call, as over loopback or to a
// backend on this node, the probe is over without any wait, timer or
// thread switch: the calls are raw system calls that never block. A
// connect still under way waits in the poller, cut by the probe's
// timeout.
//
// It ends a connection with a reset, as health checkers do, so that
// probes leave no connection in TIME_WAIT on this node: at thousands of
// probes a second those would use up its ports. It keeps its socket (one
// per address family) from probe to probe: connect(2) with AF_UNSPEC
// resets the connection and leaves the socket as new, which spares a
// socket's creation and release in the kernel for each probe.
type tcpProber struct {
	poller *connectPoller
	slot   int // in the poller
	// socks are the sockets kept for the next probe, IPv4 and IPv6 (-1:
	// none); registered, whether each is in the poller's epoll set.
	socks      [2]int
	registered [2]bool

	mu sync.Mutex
	// waiting is the socket of the connect the poller waits for (-1:
	// none), and seq counts the waits, so that an abort that comes late
	// (its probe over) shuts nothing down.
	waiting int
	seq     uint64
	aborted bool
}

func newTCPProber(p *connectPoller, slot int) *tcpProber {
	return &tcpProber{poller: p, slot: slot, waiting: -1, socks: [2]int{-1, -1}}
}

// close closes the sockets kept.
func (p *tcpProber) close() {
	for i, fd := range p.socks {
		if fd >= 0 {
			unix.Close(fd)
			p.socks[i] = -1
		}
	}
}

// probe connects to to. When the connect does not end in the call,
// abortAt is called with how to give up (the probe's timeout, on the
// checker's clock, or its backend gone): it shuts the socket down, which
// ends the connect under way; abortAt returns how to cancel that.
func (p *tcpProber) probe(to netip.AddrPort, timeout time.Duration, abortAt func(abort func()) (stop func() bool)) error {
	fam := 0
	if !to.Addr().Is4() {
		fam = 1
	}
	fd, err := p.socket(fam)
	if err != nil {
		return err
	}
	var sa rawSockaddr
	sa.set(to)
	errno := sa.connect(fd)
	if errno == unix.EINPROGRESS {
		// Over loopback the handshake is over already: the second call
		// says how it ended (EALREADY: still under way).
		errno = sa.connect(fd)
	}
	for errno == unix.EALREADY {
		if errno, err = p.wait(fd, &sa, &p.registered[fam], abortAt); err != nil {
			p.drop(fam)
			return err
		}
	}
	switch errno {
	case 0:
		self := selfConnected(fd, to)
		if !disconnect(fd) {
			p.drop(fam)
		}
		if self {
			return errSelfConnected
		}
		return nil
	case unix.ECONNREFUSED:
		// Reset by the backend: the socket is as new already.
	case errAborted:
		p.drop(fam) // shut down
		return timeoutError{timeout}
	default:
		p.drop(fam)
	}
	return os.NewSyscallError("connect", errno)
}

// socket returns the socket kept for the family, or a new one.
func (p *tcpProber) socket(fam int) (int, error) {
	if fd := p.socks[fam]; fd >= 0 {
		return fd, nil
	}
	family := unix.AF_INET
	if fam == 1 {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, os.NewSyscallError("socket", err)
	}
	// A reset, not a FIN, should it ever be closed connected. And a
	// half-open probe: TCP_DEFER_ACCEPT on a connecting socket holds
	// back the handshake's last ACK (for data that never comes), so the
	// reset that ends the probe reaches a backend that has only a
	// pending request, not yet a connection to make, queue, wake its
	// program for and tear down. connect(2) succeeds on the SYN-ACK
	// either way, so the verdict is the same as a full handshake's.
	err = unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1})
	if err == nil {
		err = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT, 1)
	}
	if err != nil {
		unix.Close(fd)
		return -1, os.NewSyscallError("setsockopt", err)
	}
	p.socks[fam], p.registered[fam] = fd, false
	return fd, nil
}

// drop closes the family's socket: the next probe makes a new one.
func (p *tcpProber) drop(fam int) {
	unix.Close(p.socks[fam]) // also takes it out of the epoll set
	p.socks[fam], p.registered[fam] = -1, false
}

// disconnect resets fd's connection (connect(2) to AF_UNSPEC), leaving a
// socket that may connect again. The reset leaves ECONNRESET on it,
// which the next connect clears (it would otherwise wake that connect's
// wait at once: TestTCPProbeWaitsForItsConnectUnderWay).
func disconnect(fd int) bool {
	unspec := unix.RawSockaddr{Family: unix.AF_UNSPEC}
	_, _, errno := unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&unspec)), unsafe.Sizeof(unspec))
	return errno == 0
}

// errAborted is a wait ended by abort.
const errAborted = unix.ECANCELED

// wait waits in the poller for fd's connect under way, and returns how
// it ended, as connect(2) says it (EALREADY: not yet), or errAborted.
func (p *tcpProber) wait(fd int, sa *rawSockaddr, registered *bool, abortAt func(func()) func() bool) (unix.Errno, error) {
	p.mu.Lock()
	p.seq++
	seq := p.seq
	p.waiting, p.aborted = fd, false
	p.mu.Unlock()
	stop := abortAt(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.seq == seq && p.waiting >= 0 && !p.aborted {
			p.aborted = true
			unix.Shutdown(p.waiting, unix.SHUT_RDWR) // wakes the poller
		}
	})
	err := p.poller.wait(p.slot, fd, registered)
	stop()
	p.mu.Lock()
	aborted := p.aborted
	p.waiting = -1
	p.mu.Unlock()
	if err != nil {
		return 0, err
	}
	if aborted {
		// Shut down: a connect now would start a new connection.
		return errAborted, nil
	}
	return sa.connect(fd), nil
}

// rawSockaddr is a sockaddr_in or sockaddr_in6, built on the stack: the
// unix package's Sockaddr values escape to the heap.
type rawSockaddr struct {
	raw unix.RawSockaddrInet6 // sockaddr_in fits in its first bytes
	len uintptr
}

func (s *rawSockaddr) set(to netip.AddrPort) {
	port := to.Port()
	if to.Addr().Is4() {
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&s.raw))
		sa.Family = unix.AF_INET
		sa.Addr = to.Addr().As4()
		*(*[2]byte)(unsafe.Pointer(&sa.Port)) = [2]byte{byte(port >> 8), byte(port)}
		s.len = unix.SizeofSockaddrInet4
		return
	}
	s.raw.Family = unix.AF_INET6
	s.raw.Addr = to.Addr().As16()
	*(*[2]byte)(unsafe.Pointer(&s.raw.Port)) = [2]byte{byte(port >> 8), byte(port)}
	s.len = unix.SizeofSockaddrInet6
}

// connect is connect(2) on a non-blocking socket: it never blocks, so it
// is a raw system call (no hand-off of the thread's P).
func (s *rawSockaddr) connect(fd int) unix.Errno {
	_, _, errno := unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&s.raw)), s.len)
	return errno
}

// errSelfConnected is a probe that reached itself: with nobody listening
// on a local port, the kernel may pick that very port as the probe's
// source, and a TCP connection to oneself succeeds ("simultaneous
// open"). It passed nothing.
var errSelfConnected = errors.New("connect: connected to itself: nothing listens")

// selfConnected reports whether the socket fd, connected to to, is
// connected from to itself.
func selfConnected(fd int, to netip.AddrPort) bool {
	var local rawSockaddr
	n := uint32(unsafe.Sizeof(local.raw))
	_, _, errno := unix.RawSyscall(unix.SYS_GETSOCKNAME, uintptr(fd), uintptr(unsafe.Pointer(&local.raw)), uintptr(unsafe.Pointer(&n)))
	if errno != 0 {
		return false
	}
	port := to.Port()
	if *(*[2]byte)(unsafe.Pointer(&local.raw.Port)) != [2]byte{byte(port >> 8), byte(port)} {
		return false
	}
	switch local.raw.Family {
	case unix.AF_INET:
		return (*unix.RawSockaddrInet4)(unsafe.Pointer(&local.raw)).Addr == to.Addr().As4()
	case unix.AF_INET6:
		return local.raw.Addr == to.Addr().As16()
	}
	return false
}
