package bpf

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"reflect"

	"github.com/cilium/ebpf"
)

// The Go forms of the reference datapath's structs in include/lb.h (the
// maps it writes and the control plane only reads), byte for byte.

// CTKey is a key of lb_ct, a packet's 5-tuple as the datapath saw it
// arrive, or of lb_sock_ct (Kind CTSocket): a socket cookie (the first 8
// bytes of Src, host order) and the address the socket talks to.
type CTKey struct {
	Src   [16]byte
	Dst   [16]byte
	SPort [2]byte
	DPort [2]byte
	Proto uint8
	Kind  uint8
	Pad   [2]uint8
}

// CTValue is a value of lb_ct and lb_sock_ct.
type CTValue struct {
	BackendID uint32
	RevNatID  uint32
	// Expires is the datapath's clock (monotonic seconds) after which the
	// entry is dead; the garbage collector deletes it then.
	Expires uint32
	Dir     uint8
	Flags   uint8
	// PeerPort and Peer, in a reply entry, are the address the client
	// sent to: the forward entry's destination. A forward entry or a
	// flow's one entry (Dir CTFlow) of TCP keeps in Peer[0:4] the
	// sequence number of the flow's first packet, to tell the client's
	// SYN again from a new connection.
	PeerPort [2]byte
	Peer     [16]byte
}

// Kinds of CTKey, directions and flags of CTValue, as in lb.h. A flow
// of packets has one entry (CTClient, CTFlow) keyed by its client's
// address, port and protocol, or, when it cannot, two (CTPacket,
// CTForward and CTReply) keyed by each direction's 5-tuple.
const (
	CTPacket  = 0
	CTSocket  = 1
	CTClient  = 2
	CTForward = 0
	CTReply   = 1
	CTFlow    = 2

	CTFlagReplied = 1 << 0 // a reply was seen
	CTFlagClosing = 1 << 1 // a FIN or RST was seen
	// A side's close (its FIN, or either side's RST) was seen; a flow
	// closed both ways yields its client's port to a new connection.
	CTFlagClientClosed  = 1 << 4
	CTFlagBackendClosed = 1 << 5
)

// NewCTKey returns the lb_ct key of a packet from src to dst.
func NewCTKey(src, dst netip.AddrPort, proto uint8) CTKey {
	k := CTKey{Src: src.Addr().As16(), Dst: dst.Addr().As16(), Proto: proto, Kind: CTPacket}
	binary.BigEndian.PutUint16(k.SPort[:], src.Port())
	binary.BigEndian.PutUint16(k.DPort[:], dst.Port())
	return k
}

// NewCTClientKey returns the lb_ct key of the one entry of a flow of
// client (a flow's packets come from it, its replies go to it).
func NewCTClientKey(client netip.AddrPort, proto uint8) CTKey {
	k := CTKey{Src: client.Addr().As16(), Proto: proto, Kind: CTClient}
	binary.BigEndian.PutUint16(k.SPort[:], client.Port())
	return k
}

// CounterKey is a key of lb_counters.
type CounterKey struct {
	RevNatID  uint32
	BackendID uint32
}

// CounterValue is one CPU's value of lb_counters.
type CounterValue struct {
	Flows   uint64
	Packets uint64
	Bytes   uint64
}

// SumCounters adds up the per-CPU values of a counter.
func SumCounters(perCPU []CounterValue) CounterValue {
	var s CounterValue
	for _, v := range perCPU {
		s.Flows += v.Flows
		s.Packets += v.Packets
		s.Bytes += v.Bytes
	}
	return s
}

// DropKey is a key of lb_drops.
type DropKey struct {
	RevNatID uint32
	Reason   uint32
}

// Reasons of DropKey, as in lb.h.
const (
	DropNoBackend    = 1
	DropSourceRange  = 2
	DropMissingEntry = 3
	DropUnsupported  = 4
	DropRewrite      = 5
	DropRejected     = 6
	DropCTCollision  = 7
	DropFragNoFirst  = 8
	DropICMP         = 9
	// DropTornMaster: the frontend's master entry was rewritten under
	// every read of it (master.h, lb_read_master); counted under
	// frontend ID 0, which the datapath could not trust.
	DropTornMaster = 10
)

// DropReasons names each drop reason, as metrics and lbctl show it.
var DropReasons = map[uint32]string{
	DropNoBackend:    "no-backend",
	DropSourceRange:  "source-range",
	DropMissingEntry: "missing-entry",
	DropUnsupported:  "unsupported",
	DropRewrite:      "rewrite",
	DropRejected:     "rejected",
	DropCTCollision:  "ct-collision",
	DropFragNoFirst:  "frag-no-first",
	DropICMP:         "icmp",
	DropTornMaster:   "torn-master",
}

// bindPerCPU binds a per-CPU hash map, whose values are one V per
// possible CPU.
func bindPerCPU[K comparable, V any](field func(*Maps) *Map[K, []V]) binding {
	b := bindHash(field)
	b.valueSize, b.valueType = sizeOf[V](), reflect.TypeFor[V]()
	b.kernel = func(m *Maps, d *mapDef, em *ebpf.Map, _ *ebpf.MapSpec) {
		*field(m) = &kernelPerCPUMap[K, V]{kernelMap[K, []V]{m: em, name: d.name}}
	}
	return b
}

// kernelPerCPUMap is a per-CPU kernel map: cilium/ebpf reads a value into
// a slice but writes one from the slice itself, one element per possible
// CPU.
type kernelPerCPUMap[K comparable, V any] struct {
	kernelMap[K, []V]
}

func (m *kernelPerCPUMap[K, V]) Update(k K, v []V) error {
	return m.wrap("update", m.m.Update(&k, v, ebpf.UpdateAny))
}

func (m *kernelPerCPUMap[K, V]) BatchUpdate(ks []K, vs [][]V) error {
	if len(ks) != len(vs) {
		return fmt.Errorf("%s: batch update: %d keys but %d values", m.name, len(ks), len(vs))
	}
	for i := range ks {
		if err := m.Update(ks[i], vs[i]); err != nil {
			return err
		}
	}
	return nil
}
