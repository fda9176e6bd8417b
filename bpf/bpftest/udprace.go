package bpftest

import (
	"bufio"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// udpRace runs a udprace line (see RunClient): sockets unconnected UDP
// sockets each send one datagram to addr, then two threads, each bound
// to a CPU of its own, send datagrams from all of them in turn for d, so
// that the socket programs on one CPU write a socket's lb_sock_ct
// entries while those on the other look them up. It prints "sent N1 N2",
// the datagrams each thread sent after the first ones.
func udpRace(out *bufio.Writer, addr string, sockets int, d time.Duration) error {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return err
	}
	family, sa := unix.AF_INET6, unix.Sockaddr(&unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()})
	if ap.Addr().Is4() {
		family, sa = unix.AF_INET, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	}
	var cpus unix.CPUSet
	if err := unix.SchedGetaffinity(0, &cpus); err != nil {
		return err
	}
	var two []int
	for c := 0; c < 1024 && len(two) < 2; c++ {
		if cpus.IsSet(c) {
			two = append(two, c)
		}
	}
	if len(two) < 2 {
		return errors.New("udprace needs two CPUs")
	}
	fds := make([]int, sockets)
	defer func() {
		for _, fd := range fds {
			if fd > 0 {
				unix.Close(fd)
			}
		}
	}()
	payload := []byte("x")
	for i := range fds {
		if fds[i], err = unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
		if err := unix.Sendto(fds[i], payload, 0, sa); err != nil {
			return err
		}
	}
	var (
		wg   sync.WaitGroup
		sent [2]int
		errs [2]error
	)
	deadline := time.Now().Add(d)
	for th, cpu := range two {
		wg.Go(func() {
			// Bound for good: the runtime ends a thread still locked
			// when its goroutine returns, so none other inherits it.
			runtime.LockOSThread()
			var set unix.CPUSet
			set.Set(cpu)
			if errs[th] = unix.SchedSetaffinity(0, &set); errs[th] != nil {
				return
			}
			for i := 0; ; i++ {
				if i%256 == 0 && time.Now().After(deadline) {
					return
				}
				if errs[th] = unix.Sendto(fds[i%sockets], payload, 0, sa); errs[th] != nil {
					return
				}
				sent[th]++
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		return err
	}
	fmt.Fprintln(out, "sent", sent[0], sent[1])
	return nil
}
