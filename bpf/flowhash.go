package bpf

import (
	"net/netip"

	"github.com/lbstate/lbstate/lb"
)

// FlowHash is lb_flow_hash of include/lb.h: FNV-1a (32 bits) over the
// client's 16-byte address and port, the frontend's 16-byte address and
// port (ports in network order, IPv4 mapped into IPv6) and the frontend's
// protocol byte (0 for an any-protocol frontend). The reference datapath
// takes Maglev slot FlowHash % M for a new flow; TestFlowHashMatchesC
// holds the two implementations together.
func FlowHash(client netip.AddrPort, frontend lb.L3n4Addr) uint32 {
	const offset, prime = 2166136261, 16777619
	h := uint32(offset)
	write := func(bs ...byte) {
		for _, b := range bs {
			h ^= uint32(b)
			h *= prime
		}
	}
	ca, fa := client.Addr().Unmap().As16(), frontend.Addr().As16()
	write(ca[:]...)
	write(byte(client.Port()>>8), byte(client.Port()))
	write(fa[:]...)
	write(byte(frontend.Port()>>8), byte(frontend.Port()), byte(frontend.Protocol()))
	return h
}

// MaglevSlot returns the slot of a Maglev table of tableSize slots that
// the reference datapath looks up for a new flow: FlowHash modulo the
// size.
func MaglevSlot(client netip.AddrPort, frontend lb.L3n4Addr, tableSize int) int {
	return int(FlowHash(client, frontend) % uint32(tableSize))
}
