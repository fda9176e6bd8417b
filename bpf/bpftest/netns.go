package bpftest

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Netns is a network namespace of a test's own, with its loopback up:
// traffic a test sends in it, and programs it attaches to its interfaces,
// never touch the host's network. It goes away when the test ends and
// nothing else holds it.
type Netns struct {
	h netns.NsHandle
}

// NewNetns creates a network namespace for the test (root only; without
// the privilege the test skips, or fails with LBSTATE_REQUIRE_BPF=1).
func NewNetns(t testing.TB) *Netns {
	t.Helper()
	Require(t)
	var n Netns
	err := onThread(func() (err error) {
		n.h, err = netns.New() // enters it
		return err
	})
	if err != nil {
		t.Fatalf("creating a network namespace: %v", err)
	}
	t.Cleanup(func() { n.h.Close() })
	err = n.Do(func() error {
		lo, err := netlink.LinkByName("lo")
		if err == nil {
			err = netlink.LinkSetUp(lo)
		}
		return err
	})
	if err != nil {
		t.Fatalf("bringing up lo in the test's network namespace: %v", err)
	}
	return &n
}

// Do runs fn on an OS thread inside the namespace; sockets fn creates
// stay in it, whichever thread uses them later. fn runs on another
// goroutine: it must report failures by its error, not t.Fatal.
func (n *Netns) Do(fn func() error) error {
	return onThread(func() error {
		if err := netns.Set(n.h); err != nil {
			return fmt.Errorf("entering the test's network namespace: %w", err)
		}
		return fn()
	})
}

// AddAddr adds an address (a CIDR) to the namespace's loopback, where
// servers of the test can listen on it.
func (n *Netns) AddAddr(t testing.TB, cidr string) {
	t.Helper()
	err := n.Do(func() error {
		addr, err := netlink.ParseAddr(cidr)
		if err != nil {
			return err
		}
		addr.Flags = unix.IFA_F_NODAD
		lo, err := netlink.LinkByName("lo")
		if err == nil {
			err = netlink.AddrAdd(lo, addr)
		}
		if err != nil {
			return err
		}
		return waitRoute(addr.IP)
	})
	if err != nil {
		t.Fatalf("adding %s to lo in the test's network namespace: %v", cidr, err)
	}
}

// waitRoute waits until the calling thread's namespace routes ip as a
// local address: for a moment after an IPv6 address is added, the kernel
// finds no route to it.
func waitRoute(ip net.IP) error {
	var (
		routes []netlink.Route
		err    error
	)
	for range 500 {
		if routes, err = netlink.RouteGet(ip); err == nil && len(routes) > 0 && routes[0].Type == unix.RTN_LOCAL {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("no local route to %s: %v, %w", ip, routes, err)
}

// Link connects namespaces a and b with a veth pair: interface aName in
// a with address aCIDR, bName in b with bCIDR, both up.
func Link(t testing.TB, a *Netns, aName, aCIDR string, b *Netns, bName, bCIDR string) {
	t.Helper()
	err := a.Do(func() error {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: aName}, PeerName: bName}
		if err := netlink.LinkAdd(veth); err != nil {
			return err
		}
		peer, err := netlink.LinkByName(bName)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetNsFd(peer, int(b.h)); err != nil {
			return err
		}
		return setUp(aName, aCIDR)
	})
	if err == nil {
		err = b.Do(func() error { return setUp(bName, bCIDR) })
	}
	if err != nil {
		t.Fatalf("linking the test's namespaces with %s and %s: %v", aName, bName, err)
	}
}

// setUp gives the calling thread's interface name an address and brings
// it up.
func setUp(name, cidr string) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	addr, err := netlink.ParseAddr(cidr)
	if err != nil {
		return err
	}
	addr.Flags = unix.IFA_F_NODAD
	if err := netlink.AddrAdd(l, addr); err != nil {
		return err
	}
	return netlink.LinkSetUp(l)
}

// AddRoute routes dst (a CIDR) through the gateway via.
func (n *Netns) AddRoute(t testing.TB, dst, via string) {
	t.Helper()
	err := n.Do(func() error {
		_, prefix, err := net.ParseCIDR(dst)
		if err != nil {
			return err
		}
		return netlink.RouteAdd(&netlink.Route{Dst: prefix, Gw: net.ParseIP(via)})
	})
	if err != nil {
		t.Fatalf("routing %s via %s in the test's namespace: %v", dst, via, err)
	}
}

// File returns the namespace as a file, for a child process to enter
// (through exec.Cmd.ExtraFiles); the caller closes it.
func (n *Netns) File() (*os.File, error) {
	fd, err := dup(int(n.h))
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "netns"), nil
}

// onThread runs fn on a fresh goroutine locked to its OS thread, and
// moves the thread back to the process's network namespace after. A
// thread that cannot go back is never reused: it ends with its goroutine,
// still locked.
func onThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		err = fn()
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

func dup(fd int) (int, error) { return unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0) }
