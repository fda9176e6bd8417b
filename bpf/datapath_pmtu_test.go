package bpf_test

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// Path-MTU discovery works through the load balancer, with real traffic:
// a client's socket connected to a frontend sends datagrams too big for
// the link to the backend, the balancing node answers "fragmentation
// needed" about the packet as it forwarded it (to the backend), and the
// datapath translates the error so that it names the frontend: the
// client's socket learns the path's MTU. Three namespaces of the test's
// own: client, node (programs on its client-side interface, forwarding),
// backend behind a link of MTU 1280.
func TestTCPathMTUDiscoveryReachesTheClient(t *testing.T) {
	h := newDatapath(t, dpConfig())
	h.backend(1, "10.0.2.2:5000/UDP", lb.BackendActive)
	h.frontend(testFrontend{addr: "10.96.0.1:5000/UDP", id: 1, slots: []uint32{1}})
	client, node, backend := bpftest.NewNetns(t), bpftest.NewNetns(t), bpftest.NewNetns(t)
	bpftest.Link(t, client, "lbc0", "10.0.1.2/24", node, "lbn0", "10.0.1.1/24")
	bpftest.Link(t, node, "lbn1", "10.0.2.1/24", backend, "lbb0", "10.0.2.2/24")
	client.AddRoute(t, "0.0.0.0/0", "10.0.1.1")
	backend.AddRoute(t, "0.0.0.0/0", "10.0.2.1")
	err := node.Do(func() error {
		if err := setForwarding(true); err != nil {
			return err
		}
		narrow, err := netlink.LinkByName("lbn1")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetMTU(narrow, 1280); err != nil {
			return err
		}
		toClient, err := netlink.LinkByName("lbn0")
		if err != nil {
			return err
		}
		return h.dp.AttachTC(toClient.Attrs().Index, false)
	})
	if err != nil {
		t.Fatal(err)
	}

	var mtu int
	err = client.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO); err != nil {
			return err
		}
		fe := netip.MustParseAddr("10.96.0.1").As4()
		if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: fe, Port: 5000}); err != nil {
			return err
		}
		big := make([]byte, 1400)
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if _, err := unix.Write(fd, big); err != nil && !errors.Is(err, unix.EMSGSIZE) {
				return fmt.Errorf("send: %w", err)
			}
			if mtu, err = unix.GetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MTU); err != nil {
				return err
			}
			if mtu == 1280 {
				return nil
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if mtu != 1280 {
		t.Fatalf("the client's socket to the frontend has path MTU %d after 5 s of datagrams too big, want 1280 (the link to the backend's)", mtu)
	}
	if c := h.counter(1, 1); c.Packets == 0 {
		t.Fatal("no packet went through the datapath")
	}
}
