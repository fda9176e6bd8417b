package bpf

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"

	"github.com/lbstate/lbstate/lb"
)

// FlowSeed is the node's flow hash seed (lb_flow_seed in include/lb.h):
// random, made once with the kernel maps and pinned with them, so that it
// outlives restarts. The zero seed is the unkeyed hash, which in-memory
// maps keep (they steer no packets, and lbctl simulate's predictions stay
// the same run after run).
type FlowSeed struct {
	Key [16]byte
}

// IsZero says whether the seed is the zero (unkeyed) one.
func (s FlowSeed) IsZero() bool { return s == FlowSeed{} }

// String is the seed in hex, as dumps carry it.
func (s FlowSeed) String() string { return hex.EncodeToString(s.Key[:]) }

// ParseFlowSeed parses a seed's hex form.
func ParseFlowSeed(h string) (FlowSeed, error) {
	var s FlowSeed
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != len(s.Key) {
		return s, fmt.Errorf("flow seed %q: want %d bytes in hex", h, len(s.Key))
	}
	copy(s.Key[:], b)
	return s, nil
}

// newFlowSeed returns a random seed, never the zero one.
func newFlowSeed() (FlowSeed, error) {
	var s FlowSeed
	for s.IsZero() {
		if _, err := rand.Read(s.Key[:]); err != nil {
			return s, fmt.Errorf("flow seed: %w", err)
		}
	}
	return s, nil
}

const fnvOffset, fnvPrime = 2166136261, 16777619

func fnv1a(h uint32, bs ...byte) uint32 {
	for _, b := range bs {
		h ^= uint32(b)
		h *= fnvPrime
	}
	return h
}

// Basis is where the seed's flow hash starts: FNV-1a of the seed's bytes
// from FNV's offset basis, or the offset basis for the zero seed. The
// loader gives it to the datapath as a constant.
func (s FlowSeed) Basis() uint32 {
	if s.IsZero() {
		return fnvOffset
	}
	return fnv1a(fnvOffset, s.Key[:]...)
}

// FlowHash is lb_flow_hash of include/lb.h keyed by s: FNV-1a (32 bits)
// from s.Basis() over the client's 16-byte address and port, the
// frontend's 16-byte address and port (ports in network order, IPv4
// mapped into IPv6) and the frontend's protocol byte (0 for an
// any-protocol frontend). The reference datapath takes Maglev slot
// FlowHash % M for a new flow; TestFlowHashMatchesC holds the two
// implementations together.
func (s FlowSeed) FlowHash(client netip.AddrPort, frontend lb.L3n4Addr) uint32 {
	ca, fa := client.Addr().Unmap().As16(), frontend.Addr().As16()
	h := fnv1a(s.Basis(), ca[:]...)
	h = fnv1a(h, byte(client.Port()>>8), byte(client.Port()))
	h = fnv1a(h, fa[:]...)
	return fnv1a(h, byte(frontend.Port()>>8), byte(frontend.Port()), byte(frontend.Protocol()))
}

// FlowHash is the unkeyed flow hash: FlowSeed{}.FlowHash, that of maps
// whose seed is zero (in-memory maps).
func FlowHash(client netip.AddrPort, frontend lb.L3n4Addr) uint32 {
	return FlowSeed{}.FlowHash(client, frontend)
}

// MaglevSlot returns the slot of a Maglev table of tableSize slots that
// the reference datapath looks up for a new flow, with the seed s:
// FlowHash modulo the size.
func (s FlowSeed) MaglevSlot(client netip.AddrPort, frontend lb.L3n4Addr, tableSize int) int {
	return int(s.FlowHash(client, frontend) % uint32(tableSize))
}

// MaglevSlot is FlowSeed{}.MaglevSlot: the slot with the unkeyed hash.
func MaglevSlot(client netip.AddrPort, frontend lb.L3n4Addr, tableSize int) int {
	return FlowSeed{}.MaglevSlot(client, frontend, tableSize)
}

// Seed returns the maps' flow hash seed (the zero seed if the maps have
// none).
func (m *Maps) Seed() (FlowSeed, error) {
	if m.FlowSeed == nil {
		return FlowSeed{}, nil
	}
	s, _, err := m.FlowSeed.Lookup(0)
	return s, err
}

// ensureSeed gives kernel maps a seed if they have none yet: made once,
// it stays with the pinned map.
func (m *Maps) ensureSeed() error {
	s, err := m.Seed()
	if err != nil || !s.IsZero() {
		return err
	}
	if s, err = newFlowSeed(); err != nil {
		return err
	}
	return m.FlowSeed.Update(0, s)
}
