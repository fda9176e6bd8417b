package bpf_test

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// A NodePort frontend on the any-address serves packets addressed to the
// node (the route to their destination is local) and, where the node
// forwards, no others: those are routed on untouched. Where it does not
// forward, a packet that reaches it can only be for it. The packets are
// run in a network namespace of the test's own, where the routes are
// known.
func TestTCNodePortOnTheAnyAddressServesOnlyTheNode(t *testing.T) {
	h := newDatapath(t, dpConfig())
	h.backend(1, "10.1.0.1:8080/TCP", lb.BackendActive)
	h.backend(2, "[fd00::1]:8080/TCP", lb.BackendActive)
	h.frontend(testFrontend{addr: "0.0.0.0:30080/TCP", typ: lb.SVCTypeNodePort, id: 1, slots: []uint32{1}})
	h.frontend(testFrontend{addr: "[::]:30080/TCP", typ: lb.SVCTypeNodePort, id: 2, slots: []uint32{2}})
	h.frontend(testFrontend{addr: "0.0.0.0:80/TCP", typ: lb.SVCTypeClusterIP, id: 3, slots: []uint32{1}})
	ns := bpftest.NewNetns(t)
	if err := ns.Do(addDefaultRoutes); err != nil {
		t.Fatal(err)
	}

	for i, c := range []struct {
		forwarding bool
		flow       tuple
		to         string // "" for untouched
	}{
		{true, flow("192.0.2.9:40000", "127.0.0.1:30080", lb.ProtoTCP), "10.1.0.1:8080"},
		{true, flow("[2001:db8::9]:40000", "[::1]:30080", lb.ProtoTCP), "[fd00::1]:8080"},
		{true, flow("192.0.2.9:40000", "203.0.113.9:30080", lb.ProtoTCP), ""},
		{true, flow("[2001:db8::9]:40000", "[2001:db8::1]:30080", lb.ProtoTCP), ""},
		{false, flow("192.0.2.9:40000", "203.0.113.9:30080", lb.ProtoTCP), "10.1.0.1:8080"},
		{false, flow("192.0.2.9:40000", "127.0.0.1:30080", lb.ProtoTCP), "10.1.0.1:8080"},
		// Only NodePort frontends stand for every node address.
		{true, flow("192.0.2.9:40000", "127.0.0.1:80", lb.ProtoTCP), ""},
	} {
		// A port of its own per case: two of these flows from one client
		// address and port to one backend would have the same replies,
		// which conntrack refuses (TestTCRepliesOfTwoFrontendsNeverCollide).
		c.flow.Src = netip.AddrPortFrom(c.flow.Src.Addr(), uint16(41000+i))
		pkt := packet(t, c.flow, 32)
		var (
			verdict uint32
			out     []byte
		)
		if err := ns.Do(func() (err error) {
			if err := setForwarding(c.forwarding); err != nil {
				return err
			}
			verdict, out, err = h.runIn("lb_tc_ingress", pkt)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		got := decode(t, out)
		want := c.flow.Dst
		if c.to != "" {
			want = netip.MustParseAddrPort(c.to)
		}
		if verdict != actOK || got.Dst != want {
			t.Errorf("forwarding %v: %s -> %s: verdict %d, to %s; want %s", c.forwarding, c.flow.Src, c.flow.Dst, verdict, got.Dst, want)
		}
	}
}

// setForwarding turns IP forwarding on or off in the calling thread's
// network namespace.
func setForwarding(on bool) error {
	v := []byte("0")
	if on {
		v = []byte("1")
	}
	for _, f := range []string{"/proc/sys/net/ipv4/conf/all/forwarding", "/proc/sys/net/ipv6/conf/all/forwarding"} {
		if err := os.WriteFile(f, v, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// addDefaultRoutes gives the calling thread's network namespace default
// routes through one end of a veth pair (both ends stay in it), so that a
// packet to an address not on the node has a route to be forwarded by.
func addDefaultRoutes() error {
	uplink := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "lbuplink0"}, PeerName: "lbuplink1"}
	if err := netlink.LinkAdd(uplink); err != nil {
		return err
	}
	peer, err := netlink.LinkByName("lbuplink1")
	if err != nil {
		return err
	}
	for _, l := range []netlink.Link{uplink, peer} {
		if err := netlink.LinkSetUp(l); err != nil {
			return err
		}
	}
	for _, a := range []string{"198.51.100.1/24", "2001:db8:ff::1/64"} {
		addr, _ := netlink.ParseAddr(a)
		addr.Flags = unix.IFA_F_NODAD
		if err := netlink.AddrAdd(uplink, addr); err != nil {
			return err
		}
	}
	for _, gw := range []string{"198.51.100.254", "2001:db8:ff::fe"} {
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: uplink.Attrs().Index, Gw: net.ParseIP(gw)}); err != nil {
			return fmt.Errorf("default route via %s: %w", gw, err)
		}
	}
	return nil
}
