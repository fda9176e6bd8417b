package bpf

import (
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// bpfFIPv6 is BPF_F_IPV6, a flag of bpf_l4_csum_replace (Linux 6.16): the
// packet is IPv6. Without it the helper adjusts a CHECKSUM_COMPLETE
// packet's skb->csum for a pseudo-header change as if an IPv4 header
// checksum had balanced the address change in the sum; IPv6 has none, so
// the sum goes wrong and the stack drops the packet later.
const bpfFIPv6 = 1 << 7

// l4CsumIPv6Flag returns BPF_F_IPV6 if the running kernel's
// bpf_l4_csum_replace knows it, else 0 (older kernels refuse unknown
// flags with EINVAL, on every packet). Probed once per process: a tiny tc
// program calls the helper with the flag on a test packet.
var l4CsumIPv6Flag = sync.OnceValues(func() (uint32, error) {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "lb_probe_csum6",
		Type: ebpf.SchedCLS,
		Instructions: asm.Instructions{
			// bpf_l4_csum_replace(skb, 20, 0, 0, BPF_F_IPV6 |
			// BPF_F_PSEUDO_HDR): a zero difference at a packet offset.
			asm.Mov.Imm(asm.R2, 20),
			asm.Mov.Imm(asm.R3, 0),
			asm.Mov.Imm(asm.R4, 0),
			asm.Mov.Imm(asm.R5, bpfFIPv6|1<<4),
			asm.FnL4CsumReplace.Call(),
			asm.Return(),
		},
		License: "Apache-2.0",
	})
	if err != nil {
		return 0, fmt.Errorf("probing bpf_l4_csum_replace's BPF_F_IPV6: %w", err)
	}
	defer prog.Close()
	ret, err := prog.Run(&ebpf.RunOptions{Data: make([]byte, 64)})
	if err != nil {
		return 0, fmt.Errorf("probing bpf_l4_csum_replace's BPF_F_IPV6: %w", err)
	}
	if ret != 0 {
		return 0, nil // -EINVAL: the flag is unknown
	}
	return bpfFIPv6, nil
})
