package bpf

import (
	"encoding/binary"
	"math"
	"net/netip"
	"strconv"

	"github.com/lbstate/lbstate/lb"
)

// The Go forms of the structs in include/lb.h, byte for byte (abi_test.go
// checks them against the types bpf2go derives from the object's BTF).
// Ports are kept as network-order bytes, addresses as 16 bytes with IPv4
// mapped into IPv6.

// ServiceKey is a key of lb_services.
type ServiceKey struct {
	Addr  [16]byte
	Port  [2]byte
	Slot  uint16
	Proto uint8
	Scope uint8
	Pad   [2]uint8
}

// ServiceValue is a value of lb_services: a master entry (slot 0) or a
// backend slot after the inline ones. A slot's value holds BackendID (and
// its frontend's RevNatID); a master's holds RevNatID, the ServiceMaster
// fields, and the backend IDs of slots 1..InlineSlots in Backends.
type ServiceValue struct {
	BackendID uint32
	RevNatID  uint32
	ServiceMaster
	// Backends are the backend IDs of slots 1..InlineSlots, in a master
	// entry (0 past the frontend's last slot; zero in a slot's entry).
	Backends [InlineSlots]uint32
	// Gen is a master's generation in the kernel map: kernel Maps stamp
	// every master they write with a number no other write carries, and
	// read it back as 0, so that callers never see it (services.go).
	// The datapath checks it to tell a whole copy of a master from one
	// the kernel rewrote under it.
	Gen uint64
}

// ServiceMaster is what only a master entry holds, split out so that the
// reconciler can keep (and compare with ==) what it wrote without a copy
// of the field list. Its fields lie in lb_service_value in this order
// (the ABI test flattens it); dumps show each as masterFields says.
type ServiceMaster struct {
	AffinityTimeout uint32
	Count           uint16
	Standby         uint16
	Type            uint8
	Flags           uint8
	Algorithm       uint8
	Pad             uint8
	ProxyPort       [2]byte // network order
	Fallback        uint16
}

// masterFields are a master entry's fields as dumps show them, in the
// order of the text dump: a field of ServiceMaster needs its line here
// (TestCodecCoversEveryField checks).
var masterFields = []field[ServiceValue]{
	numField("revnat", "revNatID", false, func(v *ServiceValue) *uint32 { return &v.RevNatID }),
	namedField("type", "type", func(v *ServiceValue) *uint8 { return &v.Type }, func(b uint8) string { return lb.SVCType(b).String() }),
	namedField("algorithm", "algorithm", func(v *ServiceValue) *uint8 { return &v.Algorithm }, algorithmName),
	numField("count", "count", false, func(v *ServiceValue) *uint16 { return &v.Count }),
	numField("standby", "standby", false, func(v *ServiceValue) *uint16 { return &v.Standby }),
	numField("fallback", "fallback", true, func(v *ServiceValue) *uint16 { return &v.Fallback }),
	numField("affinity", "affinityTimeout", true, func(v *ServiceValue) *uint32 { return &v.AffinityTimeout }),
	portField("proxy-port", "proxyPort", true, func(v *ServiceValue) *[2]byte { return &v.ProxyPort }),
	bitsField("flags", "flags", true, func(v *ServiceValue) *uint8 { return &v.Flags }, flagNames),
}

// slotFields are a backend slot's fields as dumps show them.
var slotFields = []field[ServiceValue]{
	backendIDField("backend", "backendID", func(v *ServiceValue) *uint32 { return &v.BackendID }),
}

// BackendReject (LB_BACKEND_REJECT) is the backend ID of a slot, or a
// Maglev table element, that rejects the new flows landing on it: a
// route's share that does not resolve (lb.Frontend.Rejected). No
// lb_backends entry has it; the reconciler's IDs never reach it.
const BackendReject = math.MaxUint32

// Backend is a value of lb_backends.
type Backend struct {
	Addr      [16]byte
	Port      [2]byte
	Proto     uint8
	State     uint8 // an lb.BackendState: LB_BACKEND_* has its values
	ClusterID uint32
	Zone      uint8
	Pad       [3]uint8
	// ID is the backend's ID, which Maps.Backends writes into its slot
	// (a dense ID map, see slotted.go): leave it 0 when writing.
	ID uint32
}

// backendFields are an lb_backends value's fields as dumps show them, in
// the order of the text dump: a field of Backend needs its line here
// (TestCodecCoversEveryField checks).
var backendFields = []field[Backend]{
	numField("", "id", false, func(b *Backend) *uint32 { return &b.ID }),
	textField("address", func(b *Backend) lb.L3n4Addr { return b.L3n4Addr() }, func(b *Backend, a lb.L3n4Addr) {
		b.Addr, b.Proto = a.Addr().As16(), uint8(a.Protocol())
		binary.BigEndian.PutUint16(b.Port[:], a.Port())
	}),
	namedField("", "state", func(b *Backend) *uint8 { return &b.State }, func(s uint8) string { return lb.BackendState(s).String() }),
	numField("cluster", "clusterID", true, func(b *Backend) *uint32 { return &b.ClusterID }),
	numField("zone", "zone", true, func(b *Backend) *uint8 { return &b.Zone }),
}

// RevNatValue is a value of lb_rev_nat.
type RevNatValue struct {
	Addr [16]byte
	Port [2]byte
	// Proto and Scope complete the frontend's identity for a restore
	// that finds only lb_rev_nat (the datapath reads address and port).
	Proto uint8
	Scope uint8
	// ID is the frontend's ID, which Maps.RevNat writes into its slot:
	// leave it 0 when writing.
	ID uint32
}

// revNatFields are an lb_rev_nat value's fields as dumps show them.
var revNatFields = []field[RevNatValue]{
	numField("", "revNatID", false, func(v *RevNatValue) *uint32 { return &v.ID }),
	textField("address", func(v *RevNatValue) netip.AddrPort { return v.AddrPort() }, func(v *RevNatValue, a netip.AddrPort) {
		v.Addr = a.Addr().As16()
		binary.BigEndian.PutUint16(v.Port[:], a.Port())
	}),
	// Not in the text: the dumps show what the datapath rewrites replies
	// with, as they did before the fields existed.
	textless(namedField("protocol", "protocol", func(v *RevNatValue) *uint8 { return &v.Proto },
		func(b uint8) string { return lb.Protocol(b).String() })),
	textless(namedField("scope", "scope", func(v *RevNatValue) *uint8 { return &v.Scope }, scopeName)),
}

// scopeName names a scope byte, one name each (lb.Scope calls every
// byte but 1 external), so that JSON reads back what was written.
func scopeName(b uint8) string {
	if b > uint8(lb.ScopeInternal) {
		return "scope(" + strconv.Itoa(int(b)) + ")"
	}
	return lb.Scope(b).String()
}

// AffinityKey is a key of lb_affinity.
type AffinityKey struct {
	Client   [16]byte
	RevNatID uint32
}

// AffinityValue is a value of lb_affinity.
type AffinityValue struct {
	BackendID uint32
	LastUsed  uint32
	// Slot is a hint: the lb_services slot (1..count) that held the
	// backend when the datapath last checked the pin; 0 for none.
	Slot uint16
	Pad  [2]uint8
}

// affinityFields are an lb_affinity entry's fields as dumps show them.
// The text leaves out the last-used time and the slot hint, which the
// datapath changes, so that dumps taken at different times compare equal.
var affinityFields = []field[AffinityEntry]{
	numField("", "revNatID", false, func(e *AffinityEntry) *uint32 { return &e.RevNatID }),
	textField("client", func(e *AffinityEntry) netip.Addr { return netip.AddrFrom16(e.Client).Unmap() },
		func(e *AffinityEntry, a netip.Addr) { e.Client = a.As16() }),
	numField("backend", "backendID", false, func(e *AffinityEntry) *uint32 { return &e.BackendID }),
	textless(numField("", "lastUsed", true, func(e *AffinityEntry) *uint32 { return &e.LastUsed })),
	textless(numField("", "slot", true, func(e *AffinityEntry) *uint16 { return &e.Slot })),
}

// SourceRangeKey is a key of lb_src_range.
type SourceRangeKey struct {
	PrefixLen uint32
	RevNatID  uint32
	Addr      [16]byte
}

// sourceRangeFields are an lb_src_range key's fields as dumps show them
// (its value is always 1).
var sourceRangeFields = []field[SourceRangeKey]{
	numField("", "revNatID", false, func(k *SourceRangeKey) *uint32 { return &k.RevNatID }),
	textField("prefix", func(k *SourceRangeKey) netip.Prefix { return k.Prefix() },
		func(k *SourceRangeKey, p netip.Prefix) { *k = NewSourceRangeKey(k.RevNatID, p) }),
}

// Flag bits of ServiceValue.Flags, as in lb.h.
const (
	FlagExtLocal     = 1 << 0
	FlagIntLocal     = 1 << 1
	FlagAffinity     = 1 << 2
	FlagSourceRanges = 1 << 3
	FlagRedirected   = 1 << 4
	FlagProxy        = 1 << 5
	// FlagSkipFromBackend: a client that is one of the redirect's
	// backends takes a fallback slot (ServiceValue.Fallback).
	FlagSkipFromBackend = 1 << 6
)

// flagNames names the bits of ServiceValue.Flags in dumps.
var flagNames = [8]string{"ext-local", "int-local", "affinity", "source-ranges", "redirected", "proxy", "skip-from-backend"}

// FlagNames returns the names of the flags set, as dumps show them.
func (m ServiceMaster) FlagNames() []string {
	var names []string
	for bit, n := range flagNames {
		if m.Flags&(1<<bit) != 0 {
			names = append(names, n)
		}
	}
	return names
}

// Algorithms of ServiceValue.Algorithm, as in lb.h.
const (
	AlgorithmRandom = 1
	AlgorithmMaglev = 2
)

// AlgorithmName returns the name of the entry's algorithm, as dumps show
// it: "random", "maglev", or the number of one this version does not know.
func (m ServiceMaster) AlgorithmName() string { return algorithmName(m.Algorithm) }

func algorithmName(a uint8) string {
	switch a {
	case AlgorithmRandom:
		return "random"
	case AlgorithmMaglev:
		return "maglev"
	}
	return strconv.Itoa(int(a))
}

// NewServiceKey returns the key of a frontend's slot.
func NewServiceKey(addr lb.L3n4Addr, slot uint16) ServiceKey {
	k := ServiceKey{Addr: addr.Addr().As16(), Slot: slot, Proto: uint8(addr.Protocol()), Scope: uint8(addr.Scope())}
	binary.BigEndian.PutUint16(k.Port[:], addr.Port())
	return k
}

// L3n4Addr returns the frontend address of the key.
func (k ServiceKey) L3n4Addr() lb.L3n4Addr {
	return lb.NewL3n4Addr(lb.Protocol(k.Proto), netip.AddrFrom16(k.Addr), binary.BigEndian.Uint16(k.Port[:]), lb.Scope(k.Scope))
}

// NewBackend returns the lb_backends value for a selected backend.
func NewBackend(ref lb.BackendRef, zone uint8) Backend {
	a := ref.Address
	return BackendOf(a.Addr().As16(), a.Port(), a.Protocol(), ref.State, ref.ClusterID, zone)
}

// BackendOf is NewBackend for an address given as its 16 bytes (IPv4
// IPv4-mapped, as netip.Addr.As16 gives them), port and protocol: the
// reconciler keeps its backends' addresses in that form and builds a value
// for every backend of every frontend it writes, where a round trip
// through lb.L3n4Addr and netip cost it 6% of its time at ten backends a
// frontend.
func BackendOf(addr [16]byte, port uint16, proto lb.Protocol, state lb.BackendState, clusterID uint32, zone uint8) Backend {
	b := Backend{
		Addr:      addr,
		Proto:     uint8(proto),
		State:     uint8(state),
		ClusterID: clusterID,
		Zone:      zone,
	}
	binary.BigEndian.PutUint16(b.Port[:], port)
	return b
}

// L3n4Addr returns the backend's address.
func (b Backend) L3n4Addr() lb.L3n4Addr {
	return lb.NewL3n4Addr(lb.Protocol(b.Proto), netip.AddrFrom16(b.Addr), binary.BigEndian.Uint16(b.Port[:]), lb.ScopeExternal)
}

// NewRevNatValue returns the lb_rev_nat value of a frontend.
func NewRevNatValue(addr lb.L3n4Addr) RevNatValue {
	v := RevNatValue{Addr: addr.Addr().As16(), Proto: uint8(addr.Protocol()), Scope: uint8(addr.Scope())}
	binary.BigEndian.PutUint16(v.Port[:], addr.Port())
	return v
}

// AddrPort returns the frontend address and port of the entry.
func (v RevNatValue) AddrPort() netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom16(v.Addr).Unmap(), binary.BigEndian.Uint16(v.Port[:]))
}

// L3n4Addr returns the frontend of the entry: its address, port,
// protocol and scope (ANY and external in an older agent's entry).
func (v RevNatValue) L3n4Addr() lb.L3n4Addr {
	ap := v.AddrPort()
	return lb.NewL3n4Addr(lb.Protocol(v.Proto), ap.Addr(), ap.Port(), lb.Scope(v.Scope))
}

// NewSourceRangeKey returns the lb_src_range key admitting prefix for a
// frontend.
func NewSourceRangeKey(revNatID uint32, prefix netip.Prefix) SourceRangeKey {
	bits := prefix.Bits()
	if prefix.Addr().Is4() {
		bits += 96
	}
	return SourceRangeKey{PrefixLen: 32 + uint32(bits), RevNatID: revNatID, Addr: prefix.Addr().As16()}
}

// Prefix returns the client prefix of the key.
func (k SourceRangeKey) Prefix() netip.Prefix {
	addr := netip.AddrFrom16(k.Addr)
	bits := int(k.PrefixLen) - 32
	if addr.Is4In6() && bits >= 96 {
		return netip.PrefixFrom(addr.Unmap(), bits-96)
	}
	return netip.PrefixFrom(addr, bits)
}

// covers reports whether k, a stored range, admits key's client for the
// same frontend, and k's prefix length: what the kernel's LPM trie
// matches.
func (k SourceRangeKey) covers(key SourceRangeKey) (uint32, bool) {
	return k.PrefixLen, k.RevNatID == key.RevNatID && k.PrefixLen <= key.PrefixLen && k.Prefix().Contains(key.Prefix().Addr())
}
