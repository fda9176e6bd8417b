package bpf_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// sockSetup is a network namespace with three named backends per family,
// serving TCP and UDP on port 8080, and a cgroup with the socket programs
// attached.
type sockSetup struct {
	*dpHarness
	ns *bpftest.Netns
	cg string
}

func newSockSetup(t *testing.T) *sockSetup {
	return newSockSetupOptions(t, bpf.DefaultDatapathOptions)
}

// newSockSetupOptions is newSockSetup with the datapath's options.
func newSockSetupOptions(t *testing.T, opts bpf.DatapathOptions) *sockSetup {
	h := newDatapathOptions(t, dpConfig(), opts)
	s := &sockSetup{dpHarness: h, ns: bpftest.NewNetns(t), cg: bpftest.Cgroup(t)}
	for i := 1; i <= 3; i++ {
		for _, a := range []string{fmt.Sprintf("10.1.0.%d", i), fmt.Sprintf("fd00:1::%d", i)} {
			bits := "/32"
			if strings.Contains(a, ":") {
				bits = "/128"
			}
			s.ns.AddAddr(t, a+bits)
			bpftest.ServeName(t, s.ns, a, 8080, fmt.Sprintf("b%d", i))
		}
	}
	// Backend IDs: 1-3 IPv4 TCP, 4-6 IPv6 TCP, 7-9 IPv4 UDP, 10-12 IPv6 UDP.
	for i := uint32(0); i < 3; i++ {
		h.backend(1+i, fmt.Sprintf("10.1.0.%d:8080/TCP", i+1), lb.BackendActive)
		h.backend(4+i, fmt.Sprintf("[fd00:1::%d]:8080/TCP", i+1), lb.BackendActive)
		h.backend(7+i, fmt.Sprintf("10.1.0.%d:8080/UDP", i+1), lb.BackendActive)
		h.backend(10+i, fmt.Sprintf("[fd00:1::%d]:8080/UDP", i+1), lb.BackendActive)
	}
	if err := h.dp.AttachCgroup(s.cg); err != nil {
		t.Fatal(err)
	}
	return s
}

// weighted gives backends first, first+1, first+2 weights 1, 2 and 3.
func weighted(first uint32) []uint32 {
	return []uint32{first, first + 1, first + 1, first + 2, first + 2, first + 2}
}

// Real connections and datagrams of a process in the cgroup, to a
// frontend no interface has, reach the backends in the weights'
// proportions, and the sockets show the frontend as their peer
// (getpeername, recvmsg), for IPv4 and IPv6, TCP, UDP and connected UDP.
// Each connect is counted as a new flow of its backend.
func TestSocketLBSpreadsConnectionsByWeightAndShowsTheFrontend(t *testing.T) {
	s := newSockSetup(t)
	s.frontend(testFrontend{addr: "10.96.0.10:80/TCP", id: 1, slots: weighted(1)})
	s.frontend(testFrontend{addr: "[fd00:96::10]:80/TCP", id: 2, slots: weighted(4), maglev: true})
	s.frontend(testFrontend{addr: "10.96.0.10:53/UDP", id: 3, slots: weighted(7)})
	s.frontend(testFrontend{addr: "[fd00:96::10]:53/UDP", id: 4, slots: weighted(10)})
	const n = 600
	for _, c := range []struct{ op, frontend string }{
		{"tcp", "10.96.0.10:80"},
		{"tcp", "[fd00:96::10]:80"},
		{"udp", "10.96.0.10:53"},
		{"udpc", "10.96.0.10:53"},
		{"udp", "[fd00:96::10]:53"},
		{"udpc", "[fd00:96::10]:53"},
	} {
		lines := bpftest.RunClient(t, s.cg, s.ns, fmt.Sprintf("%s %s %d", c.op, c.frontend, n))
		bpftest.CheckWeights(t, c.op+" "+c.frontend, lines, c.frontend, 1, 2, 3)
	}
	var flows uint64
	for id := uint32(1); id <= 3; id++ {
		flows += s.counter(1, id).Flows
	}
	if flows != n {
		t.Errorf("frontend 1 counted %d new flows, want %d", flows, n)
	}
}

// An unconnected UDP socket keeps sending to one backend, as a flow keeps
// its backend in conntrack, while that backend exists.
func TestSocketLBKeepsAUDPSocketOnItsBackend(t *testing.T) {
	s := newSockSetup(t)
	s.frontend(testFrontend{addr: "10.96.0.10:53/UDP", id: 1, slots: weighted(7)})
	for range 5 {
		lines := bpftest.RunClient(t, s.cg, s.ns, "udp1 10.96.0.10:53 20")
		for _, l := range lines {
			if l != lines[0] {
				t.Fatalf("one socket's datagrams went to several backends: %v", lines)
			}
		}
	}
}

// A connect to a frontend no backend takes is refused, and counted as a
// drop; a connect to an address no frontend has is left alone.
func TestSocketLBRefusesFrontendsWithoutBackendsAndLeavesOthersAlone(t *testing.T) {
	s := newSockSetup(t)
	s.frontend(testFrontend{addr: "10.96.0.11:80/TCP", id: 1})
	lines := bpftest.RunClient(t, s.cg, s.ns, "tcp 10.96.0.11:80 2", "tcp 10.1.0.2:8080 1", "tcp [fd00:1::3]:8080 1")
	want := []string{"refused 10.96.0.11:80", "refused 10.96.0.11:80", "b2 10.1.0.2:8080", "b3 [fd00:1::3]:8080"}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("the client saw\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if n := s.drops(1, bpf.DropNoBackend); n != 2 {
		t.Errorf("%d no-backend drops, want 2", n)
	}
}

// With session affinity, every connect of a network namespace goes to the
// backend the namespace is pinned to: the socket's address is not known
// at connect(), so the namespace stands for the client.
func TestSocketLBAffinityPinsTheClientsNetworkNamespace(t *testing.T) {
	s := newSockSetup(t)
	s.frontend(testFrontend{addr: "10.96.0.10:80/TCP", id: 1, slots: weighted(1), affinity: 60})
	lines := bpftest.RunClient(t, s.cg, s.ns, "tcp 10.96.0.10:80 50")
	for _, l := range lines {
		if l != lines[0] {
			t.Fatalf("connections of one namespace went to several backends: %v", lines)
		}
	}
	n := 0
	s.check(s.maps.Affinity.Iterate(func(k bpf.AffinityKey, v bpf.AffinityValue) bool {
		n++
		if k.RevNatID != 1 || [8]byte(k.Client[:8]) != [8]byte{} || [8]byte(k.Client[8:]) == [8]byte{} {
			t.Errorf("affinity entry %+v: want the frontend's, with a network namespace's cookie as the client", k)
		}
		return true
	}))
	if n != 1 {
		t.Errorf("%d affinity entries, want 1", n)
	}
}

// A connect that lands on a reject slot (a route's share that does not
// resolve) is refused and counted as a rejected drop; the others reach
// the backend: with one backend slot and one reject slot, both happen,
// and every connect is one or the other.
func TestSocketLBRefusesConnectsThatLandOnARejectSlot(t *testing.T) {
	s := newSockSetup(t)
	s.frontend(testFrontend{addr: "10.96.0.12:80/TCP", id: 1, slots: []uint32{1, bpf.BackendReject}})
	const n = 200
	var refused, served uint64
	for _, l := range bpftest.RunClient(t, s.cg, s.ns, fmt.Sprintf("tcp 10.96.0.12:80 %d", n)) {
		switch l {
		case "refused 10.96.0.12:80":
			refused++
		case "b1 10.96.0.12:80":
			served++
		default:
			t.Fatalf("unexpected client line %q", l)
		}
	}
	if refused == 0 || served == 0 || refused+served != n {
		t.Errorf("%d connects refused, %d served, want both of %d", refused, served, n)
	}
	if d := s.drops(1, bpf.DropRejected); d != refused {
		t.Errorf("%d rejected drops, want %d (the refused connects)", d, refused)
	}
	if d := s.drops(1, bpf.DropNoBackend); d != 0 {
		t.Errorf("%d no-backend drops, want 0", d)
	}
}

// A socket to a Maglev frontend takes a random element of its table, so
// that the table's weights hold: with one slot each for a backend and
// the rejected share, but a table where one element in ten rejects,
// about a tenth of the connects are refused, not half.
func TestSocketLBFollowsAMaglevTablesShares(t *testing.T) {
	s := newSockSetup(t)
	table := make([]uint32, s.maps.Maglev.TableSize())
	for i := range table {
		table[i] = 1
		if i%10 == 0 {
			table[i] = bpf.BackendReject
		}
	}
	s.frontend(testFrontend{addr: "10.96.0.13:80/TCP", id: 1, maglev: true, slots: []uint32{1, bpf.BackendReject}, table: table})
	const n = 400
	var refused int
	for _, l := range bpftest.RunClient(t, s.cg, s.ns, fmt.Sprintf("tcp 10.96.0.13:80 %d", n)) {
		if l == "refused 10.96.0.13:80" {
			refused++
		}
	}
	// About 40 (a tenth); half would be 200.
	if refused == 0 || refused > 100 {
		t.Errorf("%d of %d connects refused, want about a tenth", refused, n)
	}
}

// A closed socket leaves nothing in lb_sock_ct: lb_sock_release deletes
// the entry its connect() wrote, so that the LRU never evicts a live
// socket's entry (which getpeername needs while the socket lasts) for the
// sockets that came and went since, and a connect() inserts without
// evicting. TCP and connected UDP sockets, IPv4 and IPv6, all closed by
// the client: no entry left. An unconnected UDP socket's entries (one
// pair per frontend it sent to) cannot be found from the socket and stay
// to the LRU: they are there, so that the test sees entries it could
// have missed.
func TestSocketLBClosedSocketsLeaveNoSocketConntrackEntries(t *testing.T) {
	s := newSockSetup(t)
	s.frontend(testFrontend{addr: "10.96.0.10:80/TCP", id: 1, slots: weighted(1)})
	s.frontend(testFrontend{addr: "[fd00:96::10]:80/TCP", id: 2, slots: weighted(4)})
	s.frontend(testFrontend{addr: "10.96.0.10:53/UDP", id: 3, slots: weighted(7)})
	s.frontend(testFrontend{addr: "[fd00:96::10]:53/UDP", id: 4, slots: weighted(10)})
	lines := bpftest.RunClient(t, s.cg, s.ns, "tcp 10.96.0.10:80 20", "tcp [fd00:96::10]:80 20",
		"udpc 10.96.0.10:53 20", "udpc [fd00:96::10]:53 20")
	for _, l := range lines {
		if _, peer, _ := strings.Cut(l, " "); peer != "10.96.0.10:80" && peer != "[fd00:96::10]:80" &&
			peer != "10.96.0.10:53" && peer != "[fd00:96::10]:53" {
			t.Fatalf("a socket showed %q, not its frontend", l)
		}
	}
	// The client has exited, but a socket is released (and its entry
	// deleted) when its file's last reference goes, which another task
	// holding the exited client's files (a reader of /proc/PID/fd) may
	// drop a moment later: poll, with a deadline.
	if n, err := sockEntriesSettle(s, 0); err != nil || n != 0 {
		t.Errorf("after 80 connected sockets closed, lb_sock_ct holds %d entries (%v), want 0", n, err)
	}
	bpftest.RunClient(t, s.cg, s.ns, "udp 10.96.0.10:53 3")
	if n, err := sockEntriesSettle(s, 6); err != nil || n != 6 {
		t.Errorf("after 3 unconnected UDP sockets, lb_sock_ct holds %d entries (%v), want 6 (a pair each)", n, err)
	}
}

// sockEntriesSettle counts lb_sock_ct's entries until there are want,
// for at most 5 s, and returns the last count.
func sockEntriesSettle(s *sockSetup, want int) (int, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := bpf.Count(s.maps.SockConntrack)
		if err != nil || n == want || time.Now().After(deadline) {
			return n, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}
