package bpf_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// A frontend with a proxy redirect sends the new flows of both families
// to the L7 proxy's port at the loopback address, for every packet of the
// flow (counted as one flow of backend ID 0); replies come back from the
// frontend. Without the flag, new flows go to the slots' backends again.
func TestTCProxyRedirectSendsNewFlowsToTheProxyPort(t *testing.T) {
	h := newDatapath(t, dpConfig())
	h.backend(1, "10.0.0.1:8080/TCP", lb.BackendActive)
	h.backend(2, "[fd00::1]:8080/UDP", lb.BackendActive)
	h.frontend(testFrontend{addr: "10.96.0.1:80/TCP", id: 1, slots: []uint32{1}, proxy: 15001})
	h.frontend(testFrontend{addr: "[fd00:96::1]:53/UDP", id: 2, slots: []uint32{2}, proxy: 15053})
	for _, c := range []struct {
		f     tuple
		id    uint32
		proxy string
	}{
		{flow("192.0.2.7:40000", "10.96.0.1:80", lb.ProtoTCP), 1, "127.0.0.1:15001"},
		{flow("[2001:db8::7]:40000", "[fd00:96::1]:53", lb.ProtoUDP), 2, "[::1]:15053"},
	} {
		for range 3 {
			if got := h.balance(c.f); got.Dst != netip.MustParseAddrPort(c.proxy) || got.Src != c.f.Src {
				t.Fatalf("%v went to %v, want %s", c.f, got, c.proxy)
			}
		}
		if v := h.counter(c.id, 0); v.Flows != 1 || v.Packets != 3 {
			t.Errorf("%v: counted %+v, want 1 flow of 3 packets to the proxy", c.f, v)
		}
		reply := tuple{Src: netip.MustParseAddrPort(c.proxy), Dst: c.f.Src, Proto: c.f.Proto}
		if verdict, got := h.send("lb_tc_egress", reply); verdict != actOK || got.Src != c.f.Dst {
			t.Errorf("the proxy's reply %v left as %v (verdict %d), want it from the frontend", reply, got, verdict)
		}
	}
	h.frontend(testFrontend{addr: "10.96.0.1:80/TCP", id: 1, slots: []uint32{1}})
	if got := h.balance(flow("192.0.2.8:40000", "10.96.0.1:80", lb.ProtoTCP)); got.Dst != netip.MustParseAddrPort("10.0.0.1:8080") {
		t.Errorf("without the proxy flag a new flow went to %v", got.Dst)
	}
}

// A redirected frontend with skip-from-backend: a client that is one of
// the redirect's backends takes the fallback slots (the service's own
// backends), any other client the redirect's backends; with no fallback
// slot, such a client is dropped for want of a backend.
func TestTCSkipFromBackendSendsTheRedirectsBackendsToTheServicesOwn(t *testing.T) {
	h := newDatapath(t, dpConfig())
	h.backend(1, "10.0.2.10:53/UDP", lb.BackendActive)  // kube-dns's own
	h.backend(2, "10.0.3.10:53/UDP", lb.BackendActive)  // kube-dns's own
	h.backend(3, "10.0.1.53:53/UDP", lb.BackendActive)  // the node-local cache
	h.backend(4, "[fd00::53]:53/UDP", lb.BackendActive) // the cache, IPv6
	h.backend(5, "[fd00::10]:53/UDP", lb.BackendActive) // kube-dns's own, IPv6
	h.frontend(testFrontend{addr: "10.96.0.10:53/UDP", id: 1, slots: []uint32{3}, redirected: true, skip: true, fallback: []uint32{1, 2}})
	h.frontend(testFrontend{addr: "[fd00:96::10]:53/UDP", id: 2, slots: []uint32{4}, redirected: true, skip: true, fallback: []uint32{5}})
	own := map[netip.AddrPort]bool{netip.MustParseAddrPort("10.0.2.10:53"): true, netip.MustParseAddrPort("10.0.3.10:53"): true}
	seen := map[netip.AddrPort]bool{}
	for port := 40000; port < 40040; port++ {
		got := h.balance(flow(fmt.Sprintf("10.0.1.53:%d", port), "10.96.0.10:53", lb.ProtoUDP))
		if !own[got.Dst] {
			t.Fatalf("the cache's own query went to %v, want one of kube-dns's backends", got.Dst)
		}
		seen[got.Dst] = true
		if got := h.balance(flow(fmt.Sprintf("10.0.5.5:%d", port), "10.96.0.10:53", lb.ProtoUDP)); got.Dst != netip.MustParseAddrPort("10.0.1.53:53") {
			t.Fatalf("a client's query went to %v, want the node-local cache", got.Dst)
		}
	}
	if len(seen) != 2 {
		t.Errorf("the cache's queries went to %v, want both of kube-dns's backends", seen)
	}
	if got := h.balance(flow("[fd00::53]:40000", "[fd00:96::10]:53", lb.ProtoUDP)); got.Dst != netip.MustParseAddrPort("[fd00::10]:53") {
		t.Errorf("the cache's IPv6 query went to %v", got.Dst)
	}
	if got := h.balance(flow("[fd00::99]:40000", "[fd00:96::10]:53", lb.ProtoUDP)); got.Dst != netip.MustParseAddrPort("[fd00::53]:53") {
		t.Errorf("a client's IPv6 query went to %v", got.Dst)
	}

	h.frontend(testFrontend{addr: "10.96.0.10:53/UDP", id: 1, slots: []uint32{3}, redirected: true, skip: true})
	if verdict, _ := h.send("lb_tc_ingress", flow("10.0.1.53:41000", "10.96.0.10:53", lb.ProtoUDP)); verdict != actShot {
		t.Errorf("the cache's query without fallback slots: verdict %d, want it dropped", verdict)
	}
	if n := h.drops(1, 1); n != 1 { // LB_DROP_NO_BACKEND
		t.Errorf("%d drops for want of a backend, want 1", n)
	}
}

// Real connections of a process in the cgroup: to a proxy-redirected
// frontend they reach the proxy listening on the loopback address (and
// getpeername shows the frontend); to a redirected frontend with
// skip-from-backend, a socket bound to a redirect backend's address
// reaches the service's own backend, another the redirect's.
func TestSocketLBOverridesProxyAndSkipFromBackend(t *testing.T) {
	s := newSockSetup(t)
	bpftest.ServeName(t, s.ns, "127.0.0.1", 15001, "proxy")
	bpftest.ServeName(t, s.ns, "::1", 15001, "proxy6")
	s.frontend(testFrontend{addr: "10.96.0.10:80/TCP", id: 1, slots: []uint32{1}, proxy: 15001})
	s.frontend(testFrontend{addr: "[fd00:96::10]:80/TCP", id: 2, slots: []uint32{4}, proxy: 15001})
	// 10.1.0.3 is the redirect's backend (node-local), 10.1.0.1 and
	// 10.1.0.2 the service's own.
	s.frontend(testFrontend{addr: "10.96.0.20:80/TCP", id: 3, slots: []uint32{3}, redirected: true, skip: true, fallback: []uint32{1, 2}})

	for _, c := range []struct{ script, want string }{
		{"tcp 10.96.0.10:80 3", "proxy 10.96.0.10:80"},
		{"tcp [fd00:96::10]:80 3", "proxy6 [fd00:96::10]:80"},
		{"tcpfrom 10.1.0.1 10.96.0.20:80 3", "b3 10.96.0.20:80"},
	} {
		for _, line := range bpftest.RunClient(t, s.cg, s.ns, c.script) {
			if line != c.want {
				t.Errorf("%s: %q, want %q", c.script, line, c.want)
			}
		}
	}
	for _, line := range bpftest.RunClient(t, s.cg, s.ns, "tcpfrom 10.1.0.3 10.96.0.20:80 20") {
		if line != "b1 10.96.0.20:80" && line != "b2 10.96.0.20:80" {
			t.Errorf("the redirect's backend's own connection: %q, want the service's own backend", line)
		}
	}
	if v := s.counter(1, 0); v.Flows != 3 {
		t.Errorf("%d flows to the proxy counted, want 3", v.Flows)
	}
	// An unbound socket cannot be told from a backend at connect(): it is
	// left untranslated, to the tc programs (here the frontend's address
	// is the namespace's own, served directly).
	s.ns.AddAddr(t, "10.96.0.20/32")
	bpftest.ServeName(t, s.ns, "10.96.0.20", 80, "direct")
	if lines := bpftest.RunClient(t, s.cg, s.ns, "tcp 10.96.0.20:80 1"); len(lines) != 1 || lines[0] != "direct 10.96.0.20:80" {
		t.Errorf("an unbound socket: %q, want it untranslated", lines)
	}
}
