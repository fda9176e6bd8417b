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
// backend behind a link of MTU 1280. IPv4 ("fragmentation needed") and
// IPv6 ("packet too big").
func TestTCPathMTUDiscoveryReachesTheClient(t *testing.T) {
	for _, tc := range []struct {
		fe, backend                         string
		client, node, nodeBack, backendCIDR string
		gwClient, gwBackend                 string
	}{
		{"10.96.0.1:5000", "10.0.2.2:5000", "10.0.1.2/24", "10.0.1.1/24", "10.0.2.1/24", "10.0.2.2/24", "10.0.1.1", "10.0.2.1"},
		{"[fd00:96::1]:5000", "[fd00:2::2]:5000", "fd00:1::2/64", "fd00:1::1/64", "fd00:2::1/64", "fd00:2::2/64", "fd00:1::1", "fd00:2::1"},
	} {
		t.Run(tc.fe, func(t *testing.T) {
			h := newDatapath(t, dpConfig())
			h.backend(1, tc.backend+"/UDP", lb.BackendActive)
			h.frontend(testFrontend{addr: tc.fe + "/UDP", id: 1, slots: []uint32{1}})
			client, node, backend := bpftest.NewNetns(t), bpftest.NewNetns(t), bpftest.NewNetns(t)
			bpftest.Link(t, client, "lbc0", tc.client, node, "lbn0", tc.node)
			bpftest.Link(t, node, "lbn1", tc.nodeBack, backend, "lbb0", tc.backendCIDR)
			fe := netip.MustParseAddrPort(tc.fe)
			anyDst := "0.0.0.0/0"
			if fe.Addr().Is6() {
				anyDst = "::/0"
			}
			client.AddRoute(t, anyDst, tc.gwClient)
			backend.AddRoute(t, anyDst, tc.gwBackend)
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
			if err := client.Do(func() (err error) { mtu, err = learnPathMTU(fe); return err }); err != nil {
				t.Fatal(err)
			}
			if mtu != 1280 {
				t.Fatalf("the client's socket to the frontend has path MTU %d after 5 s of datagrams too big, want 1280 (the link to the backend's)", mtu)
			}
			if c := h.counter(1, 1); c.Packets == 0 {
				t.Fatal("no packet went through the datapath")
			}
		})
	}
}

// learnPathMTU sends datagrams of 1,400 bytes, which must not be
// fragmented, from a UDP socket connected to fe, until the socket's path
// MTU drops below 1,400 or 5 s pass, and returns it.
func learnPathMTU(fe netip.AddrPort) (int, error) {
	family, level, discover, mtuOpt := unix.AF_INET6, unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_MTU
	var sa unix.Sockaddr = &unix.SockaddrInet6{Addr: fe.Addr().As16(), Port: int(fe.Port())}
	dontFragment := unix.IPV6_PMTUDISC_DO
	if fe.Addr().Is4() {
		family, level, discover, mtuOpt = unix.AF_INET, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_MTU
		sa = &unix.SockaddrInet4{Addr: fe.Addr().As4(), Port: int(fe.Port())}
		dontFragment = unix.IP_PMTUDISC_DO
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, level, discover, dontFragment); err != nil {
		return 0, err
	}
	if err := unix.Connect(fd, sa); err != nil {
		return 0, err
	}
	big := make([]byte, 1400)
	mtu := 0
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := unix.Write(fd, big); err != nil && !errors.Is(err, unix.EMSGSIZE) {
			return 0, fmt.Errorf("send: %w", err)
		}
		if mtu, err = unix.GetsockoptInt(fd, level, mtuOpt); err != nil {
			return 0, err
		}
		if mtu < 1400 {
			break
		}
	}
	return mtu, nil
}
