package datapath_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/bpf/datapath"
	"github.com/lbstate/lbstate/lb"
)

// e2e is a node in a network namespace of the test's own ("node"), with
// three named backends on its loopback, reached by clients of a second
// namespace ("outside") over a veth pair, and by clients of a cgroup of
// the test's own inside the node; an agent with datapath.Cell attaches
// the programs to that veth and that cgroup.
type e2e struct {
	node, outside *bpftest.Netns
	cg            string
	a             *agent
	stopped       bool
	// cfg is the maps' configuration, for an agent restarted over them.
	cfg bpf.Config
}

const (
	nodeDev      = "lbnode0"
	lbIP         = "203.0.113.10"
	clusterIP    = "10.96.0.10"
	backendCount = 3
)

func newE2E(t *testing.T) *e2e {
	e := &e2e{node: bpftest.NewNetns(t), outside: bpftest.NewNetns(t), cg: bpftest.Cgroup(t)}
	bpftest.Link(t, e.node, nodeDev, "198.51.100.1/24", e.outside, "lbout0", "198.51.100.2/24")
	e.outside.AddRoute(t, lbIP+"/32", "198.51.100.1")
	for i := 1; i <= backendCount; i++ {
		e.node.AddAddr(t, fmt.Sprintf("10.1.0.%d/32", i))
		bpftest.ServeName(t, e.node, fmt.Sprintf("10.1.0.%d", i), 8080, fmt.Sprintf("b%d", i))
	}
	e.cfg = bpftest.Config(t)
	e.a = newAgent(t, bpftest.KernelMaps(t, e.cfg), e.datapathConfig())
	// The cell finds the device, and attaches to it, in the namespace of
	// the thread that starts the hive.
	if err := e.node.Do(func() error { return e.a.h.Start(e.a.log, context.Background()) }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !e.stopped {
			e.a.stop()
		}
	})
	return e
}

// datapathConfig attaches to the node's device and the test's cgroup.
func (e *e2e) datapathConfig() datapath.Config {
	return datapath.Config{LBDatapath: datapath.ModeBoth, LBCgroup: e.cg, LBDevices: []string{nodeDev}}
}

// declare sets the web service's backends' weights (0: terminating),
// behind a ClusterIP and a LoadBalancer IP, each on 80/TCP and 53/UDP.
func (e *e2e) declare(weights ...uint16) {
	var bes []lb.BackendParams
	for i, w := range weights {
		for _, proto := range []string{"TCP", "UDP"} {
			b := be(fmt.Sprintf("10.1.0.%d:8080/%s", i+1, proto), w)
			if w == 0 {
				b.Weight, b.State = 100, lb.BackendTerminating
			}
			bes = append(bes, b)
		}
	}
	var fes []lb.FrontendParams
	for ip, typ := range map[string]lb.SVCType{clusterIP: lb.SVCTypeClusterIP, lbIP: lb.SVCTypeLoadBalancer} {
		for _, port := range []string{":80/TCP", ":53/UDP"} {
			fes = append(fes, lb.FrontendParams{Address: lb.MustParseL3n4Addr(ip + port), Type: typ})
		}
	}
	name := lb.NewServiceName("test", "web")
	e.a.write(func(txn statedb.WriteTxn) error {
		if err := e.a.w.UpsertService(txn, lb.ServiceParams{Name: name, Source: lb.SourceK8s, Algorithm: lb.AlgorithmRandom, Frontends: fes}); err != nil {
			return err
		}
		return e.a.w.SetBackends(txn, name, lb.SourceK8s, bes...)
	})
}

// Real TCP connections and UDP datagrams to the frontends reach the
// backends in the weights' proportions: from the node's own sockets (the
// cgroup programs) to the ClusterIP, and from outside over the veth (the
// tc programs) to the LoadBalancer IP; clients see the frontend as their
// peer. A change made through the Writer applies to new connections only:
// connections from before keep talking to their backends, also to one
// that is now terminating. Stopping the agent detaches every program.
func TestRealConnectionsFollowTheWeightsAndChangesApplyToNewOnes(t *testing.T) {
	e := newE2E(t)
	e.declare(100, 200, 300)
	const n = 600
	for _, c := range []struct {
		cg   string
		ns   *bpftest.Netns
		line string
		peer string
	}{
		{e.cg, e.node, fmt.Sprintf("tcp %s:80 %d", clusterIP, n), clusterIP + ":80"},
		{e.cg, e.node, fmt.Sprintf("udp %s:53 %d", clusterIP, n), clusterIP + ":53"},
		{"", e.outside, fmt.Sprintf("tcp %s:80 %d", lbIP, n), lbIP + ":80"},
		{"", e.outside, fmt.Sprintf("udp %s:53 %d", lbIP, n), lbIP + ":53"},
	} {
		bpftest.CheckWeights(t, c.line, bpftest.RunClient(t, c.cg, c.ns, c.line), c.peer, 100, 200, 300)
	}

	// Connections from outside that stay open across the change.
	var open []*persistent
	onB1 := 0
	for range 60 {
		p := dialPersistent(t, e.outside, lbIP+":80")
		open = append(open, p)
		if p.backend == "b1" {
			onB1++
		}
	}
	if onB1 == 0 {
		t.Fatal("no open connection went to b1, which is about to terminate")
	}
	e.declare(0, 100, 300) // b1 terminating
	for _, p := range open {
		if got := p.ask(t); got != p.backend {
			t.Fatalf("an open connection to %s now reaches %s", p.backend, got)
		}
	}
	bpftest.CheckWeights(t, "new connections from outside", bpftest.RunClient(t, "", e.outside, fmt.Sprintf("tcp %s:80 %d", lbIP, n)), lbIP+":80", 0, 100, 300)
	bpftest.CheckWeights(t, "new connections on the node", bpftest.RunClient(t, e.cg, e.node, fmt.Sprintf("tcp %s:80 %d", clusterIP, n)), clusterIP+":80", 0, 100, 300)

	if attached := e.attached(t); attached == 0 {
		t.Fatal("no program attached while the agent runs")
	}
	e.a.stop()
	e.stopped = true
	if attached := e.attached(t); attached != 0 {
		t.Errorf("%d programs still attached after the agent stopped", attached)
	}
}

// attached counts the programs on the node's device and the cgroup.
func (e *e2e) attached(t *testing.T) int {
	t.Helper()
	n := 0
	err := e.node.Do(func() error {
		iface, err := net.InterfaceByName(nodeDev)
		if err != nil {
			return err
		}
		for _, at := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
			r, err := link.QueryPrograms(link.QueryOptions{Target: iface.Index, Attach: at})
			if err != nil {
				return err
			}
			n += len(r.Programs)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cg, err := os.Open(e.cg)
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Close()
	for _, at := range []ebpf.AttachType{ebpf.AttachCGroupInet4Connect, ebpf.AttachCGroupUDP4Sendmsg, ebpf.AttachCGroupUDP4Recvmsg, ebpf.AttachCgroupInet4GetPeername} {
		r, err := link.QueryPrograms(link.QueryOptions{Target: int(cg.Fd()), Attach: at})
		if err != nil {
			t.Fatal(err)
		}
		n += len(r.Programs)
	}
	return n
}

// persistent is an open TCP connection to a frontend, and the backend
// that answered it first.
type persistent struct {
	c       net.Conn
	r       *bufio.Reader
	backend string
}

func dialPersistent(t *testing.T, ns *bpftest.Netns, to string) *persistent {
	t.Helper()
	var c net.Conn
	if err := ns.Do(func() (err error) { c, err = net.DialTimeout("tcp", to, 5*time.Second); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	p := &persistent{c: c, r: bufio.NewReader(c)}
	p.backend = p.read(t)
	return p
}

func (p *persistent) read(t *testing.T) string {
	t.Helper()
	p.c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := p.r.ReadString('\n')
	if err != nil {
		t.Fatalf("reading from %s: %v", p.c.RemoteAddr(), err)
	}
	return strings.TrimSpace(line)
}

// ask sends a line and returns the name the backend answers.
func (p *persistent) ask(t *testing.T) string {
	t.Helper()
	p.c.SetDeadline(time.Now().Add(5 * time.Second)) // the last read's may have passed
	if _, err := p.c.Write([]byte("again\n")); err != nil {
		t.Fatalf("writing to %s: %v", p.c.RemoteAddr(), err)
	}
	return p.read(t)
}
