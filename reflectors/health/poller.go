package health

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// connectPoller waits for the TCP probes whose connect(2) did not end in
// the call (a backend a round trip away, or one that does not answer):
// one epoll instance and one goroutine for all of them, rather than a
// thread blocked in connect(2) per probe under way. Each worker has a
// slot; its socket is registered once, with EPOLLONESHOT, and armed
// again for each wait, so that one arming brings exactly one wake-up.
type connectPoller struct {
	epfd  int
	evfd  int             // written to end the loop
	wakes []chan struct{} // by worker slot
	done  chan struct{}
}

// stopToken is the epoll data of the loop's eventfd: no worker slot.
const stopToken = -1

func newConnectPoller(slots int) (*connectPoller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	evfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, os.NewSyscallError("eventfd", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: stopToken}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, evfd, &ev); err != nil {
		unix.Close(epfd)
		unix.Close(evfd)
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	p := &connectPoller{epfd: epfd, evfd: evfd, wakes: make([]chan struct{}, slots), done: make(chan struct{})}
	for i := range p.wakes {
		p.wakes[i] = make(chan struct{}, 1)
	}
	go p.loop()
	return p, nil
}

// loop hands each event to its worker until close.
func (p *connectPoller) loop() {
	defer close(p.done)
	events := make([]unix.EpollEvent, 64)
	for {
		n, err := unix.EpollWait(p.epfd, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return // EBADF, EINVAL: cannot happen while the fds are open
		}
		for _, ev := range events[:n] {
			if ev.Fd == stopToken {
				return
			}
			p.wakes[ev.Fd] <- struct{}{} // never blocks: one event per arming
		}
	}
}

// wait arms fd for slot (registering it first if registered is false)
// and returns once it is writable, failed, or hung up (shut down).
func (p *connectPoller) wait(slot, fd int, registered *bool) error {
	ev := unix.EpollEvent{Events: unix.EPOLLOUT | unix.EPOLLONESHOT, Fd: int32(slot)}
	op := unix.EPOLL_CTL_MOD
	if !*registered {
		op = unix.EPOLL_CTL_ADD
	}
	if err := unix.EpollCtl(p.epfd, op, fd, &ev); err != nil {
		return os.NewSyscallError("epoll_ctl", err)
	}
	*registered = true
	<-p.wakes[slot]
	return nil
}

// close ends the loop, once no worker waits any more.
func (p *connectPoller) close() {
	var one [8]byte
	one[0] = 1
	unix.Write(p.evfd, one[:])
	<-p.done
	unix.Close(p.epfd)
	unix.Close(p.evfd)
}
