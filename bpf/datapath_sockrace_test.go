package bpf_test

import (
	"fmt"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// Every datagram that two threads on two CPUs send from an unconnected
// UDP socket follows the socket's backend: the frontend counts one new
// flow per socket, its first datagram, however many the threads sent.
//
// Each sendmsg() rewrites the socket's two lb_sock_ct entries (BPF_ANY on
// keys that exist), and the kernel rewrites a hash map's entry by linking
// a new element and unlinking the old one, which the next insert on that
// CPU may take at once: a lookup of the same key on another CPU could
// miss both or read the reused element, and balance the datagram anew.
// It cannot here: every lb_sock_ct key holds its socket's cookie, and the
// kernel runs a socket's sock_addr programs under its socket lock
// (BPF_CGROUP_RUN_SA_PROG_LOCK for connect, sendmsg and recvmsg;
// inet_getname holds it for getpeername), so one socket's programs never
// run on two CPUs at once. This test keeps that so (about 500,000
// datagrams in 3 s, none balanced anew).
func TestSocketLBKeepsAUDPSocketOnItsBackendWhileTwoCPUsSendFromIt(t *testing.T) {
	if len(allowedCPUs(t)) < 2 {
		t.Skip("needs two CPUs: one writes a socket's entries while the other looks them up")
	}
	const sockets, backends = 4, 8
	cfg := dpConfig()
	cfg.LBSockCTMax = 1024 // fewer buckets: some hold several of the sockets' entries
	h := newDatapath(t, cfg)
	ns, cg := bpftest.NewNetns(t), bpftest.Cgroup(t)
	var slots []uint32
	for i := uint32(1); i <= backends; i++ {
		ns.AddAddr(t, fmt.Sprintf("10.1.0.%d/32", i))
		h.backend(i, fmt.Sprintf("10.1.0.%d:9/UDP", i), lb.BackendActive) // nothing listens: no answers to read
		slots = append(slots, i)
	}
	h.frontend(testFrontend{addr: "10.96.0.10:53/UDP", id: 1, slots: slots})
	if err := h.dp.AttachCgroup(cg); err != nil {
		t.Fatal(err)
	}
	lines := bpftest.RunClient(t, cg, ns, fmt.Sprintf("udprace 10.96.0.10:53 %d 3s", sockets))
	var n1, n2 uint64
	if len(lines) != 1 {
		t.Fatalf("the client printed %q", lines)
	}
	if _, err := fmt.Sscanf(lines[0], "sent %d %d", &n1, &n2); err != nil {
		t.Fatalf("the client printed %q: %v", lines[0], err)
	}
	var c bpf.CounterValue
	for id := uint32(1); id <= backends; id++ {
		v := h.counter(1, id)
		c.Flows += v.Flows
		c.Packets += v.Packets
	}
	t.Logf("%d sockets sent %d + %d datagrams on two CPUs: %d counted, %d new flows", sockets, n1, n2, c.Packets, c.Flows)
	if c.Packets != sockets+n1+n2 {
		t.Errorf("%d datagrams counted, want %d: some were not balanced", c.Packets, sockets+n1+n2)
	}
	if c.Flows != sockets {
		t.Errorf("%d new flows, want %d (one per socket): %d datagrams were balanced anew, their lookup missed their socket's entry or read another", c.Flows, sockets, c.Flows-sockets)
	}
}
