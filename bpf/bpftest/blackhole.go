package bpftest

import (
	"net"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// Blackhole drops every packet but ARP arriving on the interface name of
// ns, with a tc program (tcx ingress) of the test's own, until the test
// ends: a backend behind it never answers a SYN, as one that is down
// without saying so (its neighbour entry resolves, so that a sender
// sees no "no route to host").
func Blackhole(t testing.TB, ns *Netns, name string) {
	t.Helper()
	const arp = 0x0608 // ETH_P_ARP as skb->protocol reads (network order) on a little-endian machine
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type: ebpf.SchedCLS, License: "Apache-2.0",
		Instructions: asm.Instructions{
			asm.LoadMem(asm.R2, asm.R1, 16, asm.Word), // __sk_buff.protocol
			asm.JEq.Imm(asm.R2, arp, "pass"),
			asm.Mov.Imm(asm.R0, 2), // TC_ACT_SHOT
			asm.Return(),
			asm.Mov.Imm(asm.R0, 0).WithSymbol("pass"), // TC_ACT_OK
			asm.Return(),
		},
	})
	if err != nil {
		t.Fatalf("loading the blackhole program: %v", err)
	}
	var l link.Link
	err = ns.Do(func() error {
		iface, err := net.InterfaceByName(name)
		if err != nil {
			return err
		}
		l, err = link.AttachTCX(link.TCXOptions{Interface: iface.Index, Program: prog, Attach: ebpf.AttachTCXIngress})
		return err
	})
	if err != nil {
		prog.Close()
		t.Fatalf("blackholing %s: %v", name, err)
	}
	t.Cleanup(func() { l.Close(); prog.Close() })
}

// Forward turns IPv4 forwarding on in ns (the namespace's own setting),
// for a node that routes balanced packets on to backends behind another
// interface.
func (n *Netns) Forward(t testing.TB) {
	t.Helper()
	// /proc/sys/net is the opening thread's namespace's.
	err := n.Do(func() error { return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0) })
	if err != nil {
		t.Fatalf("turning forwarding on in the test's namespace: %v", err)
	}
}
