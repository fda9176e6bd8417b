package bpf

import (
	"fmt"
	"io"

	"github.com/cilium/ebpf/link"
)

// DestroyOrphanedUDPSockets destroys the connected UDP sockets of the
// calling thread's network namespace that socket load balancing
// connected to a backend since gone from lb_backends, and returns how
// many it destroyed. Socket LB translates a UDP socket only at
// connect(), so such a socket would keep sending to the deleted backend;
// destroyed, it fails its next send or receive with ECONNABORTED and the
// application connects again, to a live backend (c/sockdestroy.h;
// bpf_sock_destroy, Linux 6.5), and its lb_sock_ct entry is deleted. A
// socket whose lb_sock_ct entry the LRU took is not found. One
// connected to the L7 proxy of a proxy-redirected frontend (backend ID
// 0) is an orphan once its frontend's master entry no longer sends to
// that proxy port (the redirect removed or moved, the frontend gone).
// The agent calls it after each conntrack collection.
func (d *Datapath) DestroyOrphanedUDPSockets() (int, error) {
	p := d.progs[udpReaperProgram]
	if p == nil {
		return 0, fmt.Errorf("datapath: %s is not loaded", udpReaperProgram)
	}
	it, err := link.AttachIter(link.IterOptions{Program: p})
	if err != nil {
		return 0, fmt.Errorf("datapath: %s: %w", udpReaperProgram, err)
	}
	defer it.Close()
	rd, err := it.Open()
	if err != nil {
		return 0, fmt.Errorf("datapath: %s: %w", udpReaperProgram, err)
	}
	defer rd.Close()
	n, err := io.Copy(io.Discard, rd) // one byte per socket destroyed
	if err != nil {
		return int(n), fmt.Errorf("datapath: %s: %w", udpReaperProgram, err)
	}
	return int(n), nil
}
