package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
)

// When a test fails, a connection that timed out says nothing of where
// its packets went. Before the node's agent stops and its pods go away,
// the test's log gets what the datapath and the node's kernel saw: the
// drop counters (lb_drops), the traffic counters, every conntrack entry
// (the client's flows among them), the maps, and the node's interfaces,
// neighbours and TCP counters. A drop outside the datapath (an
// interface, an unresolved neighbour) shows there as plainly as one
// inside it.

// diagnoseOnFailure has the node's state written when the test fails,
// before any cleanup registered so far runs (cleanups run last first):
// startAgent calls it, and newPod again, so that it runs while the agent
// and every pod are there. It writes once.
func (n *node) diagnoseOnFailure() {
	n.t.Cleanup(func() {
		if !n.t.Failed() || n.diagnosed || n.agent == nil || n.agent.stopped {
			return
		}
		n.diagnosed = true
		var w strings.Builder
		n.agent.diagnose(&w, n)
		n.t.Logf("what the datapath and the node saw when the test failed (diagnose_test.go):\n%s", w.String())
	})
}

// maxSectionLines bounds the lines of a section (the conntrack entries,
// the maps): the scale scenario's would drown the rest.
const maxSectionLines = 400

// diagnose writes the datapath's and the node's state to w.
func (a *agent) diagnose(w io.Writer, n *node) {
	fmt.Fprintf(w, "== the datapath (clock %d s)\n", bpf.MonotonicSeconds())
	frontends := map[uint32]string{} // names for the counters; the maps section reports a failed read
	a.maps.RevNat.Iterate(func(id uint32, v bpf.RevNatValue) bool {
		frontends[id] = v.AddrPort().String()
		return true
	})
	var lines []string
	err := a.maps.Drops.Iterate(func(k bpf.DropKey, perCPU []uint64) bool {
		var sum uint64
		for _, v := range perCPU {
			sum += v
		}
		lines = append(lines, fmt.Sprintf("drop frontend=%d(%s) reason=%s packets=%d", k.RevNatID, frontends[k.RevNatID], dropReason(k.Reason), sum))
		return true
	})
	slices.Sort(lines)
	writeSection(w, "lb_drops", lines, err)
	lines = nil
	err = a.maps.Counters.Iterate(func(k bpf.CounterKey, perCPU []bpf.CounterValue) bool {
		s := bpf.SumCounters(perCPU)
		lines = append(lines, fmt.Sprintf("count frontend=%d(%s) backend=%d flows=%d packets=%d", k.RevNatID, frontends[k.RevNatID], k.BackendID, s.Flows, s.Packets))
		return true
	})
	slices.Sort(lines)
	writeSection(w, "lb_counters", lines, err)
	for _, ct := range []struct {
		name string
		m    bpf.Map[bpf.CTKey, bpf.CTValue]
	}{{"lb_ct", a.maps.Conntrack}, {"lb_sock_ct", a.maps.SockConntrack}} {
		lines = nil
		err = ct.m.Iterate(func(k bpf.CTKey, v bpf.CTValue) bool {
			lines = append(lines, ctLine(k, v))
			return true
		})
		slices.Sort(lines)
		writeSection(w, ct.name, lines, err)
	}
	var dump bytes.Buffer
	d, err := bpf.TakeDump(a.maps)
	if err == nil {
		err = d.WriteText(&dump)
	}
	writeSection(w, "maps", strings.Split(strings.TrimSpace(dump.String()), "\n"), err)
	if n != nil {
		n.diagnose(w)
	}
}

// writeSection writes lines under a heading, at most maxSectionLines.
func writeSection(w io.Writer, name string, lines []string, err error) {
	fmt.Fprintf(w, "-- %s (%d)\n", name, len(lines))
	if err != nil {
		fmt.Fprintf(w, "reading %s: %v\n", name, err)
	}
	for i, l := range lines {
		if i == maxSectionLines {
			fmt.Fprintf(w, "... %d more\n", len(lines)-i)
			break
		}
		fmt.Fprintln(w, l)
	}
}

func dropReason(r uint32) string {
	if s, ok := bpf.DropReasons[r]; ok {
		return s
	}
	return fmt.Sprint(r)
}

// ctLine prints a conntrack entry: its key (client, or 5-tuple), and its
// direction, state, frontend, backend and expiry.
func ctLine(k bpf.CTKey, v bpf.CTValue) string {
	src := netip.AddrPortFrom(netip.AddrFrom16(k.Src).Unmap(), uint16(k.SPort[0])<<8|uint16(k.SPort[1]))
	dst := netip.AddrPortFrom(netip.AddrFrom16(k.Dst).Unmap(), uint16(k.DPort[0])<<8|uint16(k.DPort[1]))
	key := fmt.Sprintf("%s->%s", src, dst)
	switch k.Kind {
	case bpf.CTClient:
		key = "client " + src.String()
	case bpf.CTSocket:
		key = "socket " + key
	}
	dir := [...]string{bpf.CTForward: "forward", bpf.CTReply: "reply", bpf.CTFlow: "flow"}[min(int(v.Dir), 2)]
	var flags []string
	if v.Flags&bpf.CTFlagReplied != 0 {
		flags = append(flags, "replied")
	}
	if v.Flags&bpf.CTFlagClosing != 0 {
		flags = append(flags, "closing")
	}
	if rest := v.Flags &^ (bpf.CTFlagReplied | bpf.CTFlagClosing); rest != 0 {
		flags = append(flags, fmt.Sprintf("0x%x", rest))
	}
	return fmt.Sprintf("ct %s proto=%d %s flags=%s frontend=%d backend=%d expires=%d",
		key, k.Proto, dir, strings.Join(flags, ","), v.RevNatID, v.BackendID, v.Expires)
}

// diagnose writes the node's interfaces (state and counters), its
// neighbours, and the TCP counters of the node and of the external host.
func (n *node) diagnose(w io.Writer) {
	err := n.ns.Do(func() error {
		links, err := netlink.LinkList()
		if err != nil {
			return err
		}
		fmt.Fprintln(w, "-- the node's interfaces")
		for _, l := range links {
			a := l.Attrs()
			s := a.Statistics
			if s == nil {
				s = &netlink.LinkStatistics{}
			}
			fmt.Fprintf(w, "link %s %s rx=%d rx_dropped=%d tx=%d tx_dropped=%d tx_errors=%d\n",
				a.Name, a.OperState, s.RxPackets, s.RxDropped, s.TxPackets, s.TxDropped, s.TxErrors)
		}
		neighs, err := netlink.NeighList(0, 0)
		if err != nil {
			return err
		}
		fmt.Fprintln(w, "-- the node's neighbours")
		for _, nb := range neighs {
			fmt.Fprintf(w, "neigh %s %s %s\n", nb.IP, nb.HardwareAddr, neighState(nb.State))
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(w, "the node's interfaces: %v\n", err)
	}
	for _, ns := range []struct {
		name string
		ns   *bpftest.Netns
	}{{"node", n.ns}, {"external host", n.external}} {
		var mib string
		if err := ns.ns.Do(func() (err error) { mib, err = tcpCounters(); return err }); err != nil {
			mib = err.Error()
		}
		fmt.Fprintf(w, "-- TCP counters of the %s (non-zero)\n%s", ns.name, mib)
	}
}

func neighState(s int) string {
	names := map[int]string{netlink.NUD_INCOMPLETE: "INCOMPLETE", netlink.NUD_REACHABLE: "REACHABLE", netlink.NUD_STALE: "STALE",
		netlink.NUD_DELAY: "DELAY", netlink.NUD_PROBE: "PROBE", netlink.NUD_FAILED: "FAILED", netlink.NUD_NOARP: "NOARP", netlink.NUD_PERMANENT: "PERMANENT"}
	if name, ok := names[s]; ok {
		return name
	}
	return fmt.Sprintf("0x%x", s)
}

// tcpCounters reads the non-zero Tcp and TcpExt counters of the calling
// thread's network namespace (thread-self: the process's own namespace
// is another).
func tcpCounters() (string, error) {
	var out strings.Builder
	for _, f := range []string{"/proc/thread-self/net/snmp", "/proc/thread-self/net/netstat"} {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		// Each kind is two lines: "Kind: names..." then "Kind: values...".
		s := bufio.NewScanner(bytes.NewReader(data))
		for s.Scan() {
			names := strings.Fields(s.Text())
			if !s.Scan() {
				break
			}
			values := strings.Fields(s.Text())
			if len(names) == 0 || (names[0] != "Tcp:" && names[0] != "TcpExt:") || len(values) != len(names) {
				continue
			}
			for i := 1; i < len(names); i++ {
				if values[i] != "0" {
					fmt.Fprintf(&out, "%s%s=%s ", strings.TrimSuffix(names[0], ":"), names[i], values[i])
				}
			}
		}
	}
	return out.String() + "\n", nil
}
