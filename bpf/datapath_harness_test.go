package bpf_test

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// What the tc programs answer, as in linux/pkt_cls.h.
const (
	actOK   = 0
	actShot = 2
)

// dpHarness is the reference datapath loaded over kernel maps of a test's
// own, which the test writes directly, as the reconciler would.
type dpHarness struct {
	t    testing.TB
	maps *bpf.Maps
	dp   *bpf.Datapath
}

func newDatapath(t testing.TB, cfg bpf.Config) *dpHarness {
	t.Helper()
	if cfg.LBPinDir == bpf.DefaultConfig.LBPinDir {
		cfg.LBPinDir = bpftest.Config(t).LBPinDir
	}
	maps := bpftest.KernelMaps(t, cfg)
	d, err := bpf.LoadDatapath(maps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return &dpHarness{t: t, maps: maps, dp: d}
}

// dpConfig has a Maglev table of 251 slots.
func dpConfig() bpf.Config {
	cfg := bpf.DefaultConfig
	cfg.LBMaglevTableSize = 251
	return cfg
}

func (h *dpHarness) backend(id uint32, addr string, state lb.BackendState) {
	h.t.Helper()
	ref := lb.BackendRef{Address: lb.MustParseL3n4Addr(addr), State: state}
	if err := h.maps.Backends.Update(id, bpf.NewBackend(ref, 0)); err != nil {
		h.t.Fatal(err)
	}
}

// testFrontend is one frontend's entries, as the reconciler writes them.
type testFrontend struct {
	addr     string
	typ      lb.SVCType
	id       uint32
	maglev   bool
	affinity uint32 // the timeout in seconds; 0 for none
	ranges   []string
	slots    []uint32 // backend IDs taking new flows, one per slot
	standby  []uint32
	// table, with maglev, is the lookup table; nil repeats slots.
	table []uint32
}

func (h *dpHarness) frontend(f testFrontend) {
	h.t.Helper()
	fe := lb.MustParseL3n4Addr(f.addr)
	typ := f.typ
	if typ == 0 {
		typ = lb.SVCTypeClusterIP
	}
	master := bpf.ServiceValue{
		RevNatID: f.id, Count: uint16(len(f.slots)), Standby: uint16(len(f.standby)),
		Type: uint8(typ), Algorithm: bpf.AlgorithmRandom, AffinityTimeout: f.affinity,
	}
	if f.maglev {
		master.Algorithm = bpf.AlgorithmMaglev
		table := f.table
		if table == nil && len(f.slots) > 0 {
			table = make([]uint32, h.maps.Maglev.TableSize())
			for i := range table {
				table[i] = f.slots[i%len(f.slots)]
			}
		}
		if table != nil {
			h.check(h.maps.Maglev.Update(f.id, table))
		}
	}
	if f.affinity > 0 {
		master.Flags |= bpf.FlagAffinity
	}
	for _, r := range f.ranges {
		master.Flags |= bpf.FlagSourceRanges
		h.check(h.maps.SourceRanges.Update(bpf.NewSourceRangeKey(f.id, netip.MustParsePrefix(r)), 1))
	}
	for i, id := range append(append([]uint32(nil), f.slots...), f.standby...) {
		h.check(h.maps.Services.Update(bpf.NewServiceKey(fe, uint16(i+1)), bpf.ServiceValue{BackendID: id}))
	}
	h.check(h.maps.Services.Update(bpf.NewServiceKey(fe, 0), master))
	h.check(h.maps.RevNat.Update(f.id, bpf.NewRevNatValue(fe)))
}

func (h *dpHarness) check(err error) {
	h.t.Helper()
	if err != nil {
		h.t.Fatal(err)
	}
}

// tuple is a packet's addresses, ports and protocol.
type tuple struct {
	src, dst netip.AddrPort
	proto    lb.Protocol
}

func flow(src, dst string, proto lb.Protocol) tuple {
	return tuple{netip.MustParseAddrPort(src), netip.MustParseAddrPort(dst), proto}
}

func (f tuple) reply() tuple { return tuple{f.dst, f.src, f.proto} }

// packet builds an Ethernet frame of f with a payload, checksums right.
func packet(t testing.TB, f tuple, payload int) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}}
	var ip gopacket.NetworkLayer
	var ipLayer gopacket.SerializableLayer
	ipProto := layers.IPProtocolTCP
	if f.proto == lb.ProtoUDP {
		ipProto = layers.IPProtocolUDP
	}
	if f.src.Addr().Is4() {
		eth.EthernetType = layers.EthernetTypeIPv4
		ip4 := &layers.IPv4{Version: 4, TTL: 64, Protocol: ipProto, SrcIP: f.src.Addr().AsSlice(), DstIP: f.dst.Addr().AsSlice()}
		ip, ipLayer = ip4, ip4
	} else {
		eth.EthernetType = layers.EthernetTypeIPv6
		ip6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: ipProto, SrcIP: f.src.Addr().AsSlice(), DstIP: f.dst.Addr().AsSlice()}
		ip, ipLayer = ip6, ip6
	}
	var l4 gopacket.SerializableLayer
	if f.proto == lb.ProtoUDP {
		udp := &layers.UDP{SrcPort: layers.UDPPort(f.src.Port()), DstPort: layers.UDPPort(f.dst.Port())}
		udp.SetNetworkLayerForChecksum(ip)
		l4 = udp
	} else {
		tcp := &layers.TCP{SrcPort: layers.TCPPort(f.src.Port()), DstPort: layers.TCPPort(f.dst.Port()), SYN: true, Seq: 1, Window: 1024}
		tcp.SetNetworkLayerForChecksum(ip)
		l4 = tcp
	}
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true}
	if err := gopacket.SerializeLayers(buf, opts, eth, ipLayer, l4, gopacket.Payload(make([]byte, payload))); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// run runs a program of the datapath on one packet.
func (h *dpHarness) run(prog string, pkt []byte) (uint32, []byte) {
	h.t.Helper()
	p := h.dp.Program(prog)
	if p == nil {
		h.t.Fatalf("no program %s", prog)
	}
	out := make([]byte, len(pkt)+256)
	opts := &ebpf.RunOptions{Data: pkt, DataOut: out, Repeat: 1}
	verdict, err := p.Run(opts)
	if err != nil {
		h.t.Fatalf("%s: %v", prog, err)
	}
	return verdict, opts.DataOut
}

// send runs prog on a packet of f and returns its verdict and the packet's
// tuple after, checking its checksums.
func (h *dpHarness) send(prog string, f tuple) (uint32, tuple) {
	h.t.Helper()
	verdict, out := h.run(prog, packet(h.t, f, 32))
	return verdict, decode(h.t, out)
}

// balance sends a packet of f through lb_tc_ingress, which must let it
// pass, and returns where it goes.
func (h *dpHarness) balance(f tuple) tuple {
	h.t.Helper()
	verdict, out := h.send("lb_tc_ingress", f)
	if verdict != actOK {
		h.t.Fatalf("%v: verdict %d, want it passed", f, verdict)
	}
	return out
}

// decode parses a packet and checks its IPv4 header and L4 checksums.
func decode(t testing.TB, pkt []byte) tuple {
	t.Helper()
	p := gopacket.NewPacket(pkt, layers.LayerTypeEthernet, gopacket.Default)
	if el := p.ErrorLayer(); el != nil {
		t.Fatalf("undecodable packet: %v", el.Error())
	}
	var (
		f      tuple
		pseudo []byte
		l4     []byte
	)
	switch ip := p.NetworkLayer().(type) {
	case *layers.IPv4:
		if sum := onesSum(0, ip.Contents); sum != 0xffff {
			t.Errorf("IPv4 header checksum wrong (sum %#x)", sum)
		}
		src, _ := netip.AddrFromSlice(ip.SrcIP)
		dst, _ := netip.AddrFromSlice(ip.DstIP)
		f.src, f.dst = netip.AddrPortFrom(src, 0), netip.AddrPortFrom(dst, 0)
		pseudo = append(append(append([]byte{}, ip.SrcIP.To4()...), ip.DstIP.To4()...), 0, byte(ip.Protocol), byte(len(ip.Payload)>>8), byte(len(ip.Payload)))
		l4 = ip.Payload
	case *layers.IPv6:
		src, _ := netip.AddrFromSlice(ip.SrcIP)
		dst, _ := netip.AddrFromSlice(ip.DstIP)
		f.src, f.dst = netip.AddrPortFrom(src, 0), netip.AddrPortFrom(dst, 0)
		pseudo = append(append(append([]byte{}, ip.SrcIP...), ip.DstIP...), 0, 0, byte(len(ip.Payload)>>8), byte(len(ip.Payload)), 0, 0, 0, byte(ip.NextHeader))
		l4 = ip.Payload
	default:
		t.Fatalf("no IP layer in %v", p)
	}
	switch l := p.TransportLayer().(type) {
	case *layers.TCP:
		f.proto = lb.ProtoTCP
		f.src, f.dst = netip.AddrPortFrom(f.src.Addr(), uint16(l.SrcPort)), netip.AddrPortFrom(f.dst.Addr(), uint16(l.DstPort))
	case *layers.UDP:
		f.proto = lb.ProtoUDP
		f.src, f.dst = netip.AddrPortFrom(f.src.Addr(), uint16(l.SrcPort)), netip.AddrPortFrom(f.dst.Addr(), uint16(l.DstPort))
		if l.Checksum == 0 && f.src.Addr().Is4() {
			return f // no checksum, which IPv4 allows
		}
	default:
		t.Fatalf("no TCP or UDP layer in %v", p)
	}
	if sum := onesSum(onesSum(0, pseudo), l4); sum != 0xffff {
		t.Errorf("%v: L4 checksum wrong (sum %#x)", f, sum)
	}
	return f
}

// onesSum adds b to sum in ones' complement, 16 bits at a time (RFC 1071):
// a header or segment with a right checksum sums to 0xffff.
func onesSum(sum uint32, b []byte) uint32 {
	for len(b) >= 2 {
		sum += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return sum
}

// counter returns the lb_counters entry of a frontend and backend, summed
// over CPUs.
func (h *dpHarness) counter(revNatID, backendID uint32) bpf.CounterValue {
	h.t.Helper()
	v, _, err := h.maps.Counters.Lookup(bpf.CounterKey{RevNatID: revNatID, BackendID: backendID})
	h.check(err)
	return bpf.SumCounters(v)
}

// drops returns how many packets to a frontend were dropped for reason.
func (h *dpHarness) drops(revNatID, reason uint32) uint64 {
	h.t.Helper()
	v, _, err := h.maps.Drops.Lookup(bpf.DropKey{RevNatID: revNatID, Reason: reason})
	h.check(err)
	var n uint64
	for _, c := range v {
		n += c
	}
	return n
}

// backendAt returns the ID of the backend whose address is a.
func (h *dpHarness) backendAt(a netip.AddrPort) uint32 {
	h.t.Helper()
	var found uint32
	h.check(h.maps.Backends.Iterate(func(id uint32, b bpf.Backend) bool {
		if ap := b.L3n4Addr().AddrPort(); netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()) == a {
			found = id
			return false
		}
		return true
	}))
	if found == 0 {
		h.t.Fatalf("no backend at %s", a)
	}
	return found
}

// monotonicSeconds is the datapath's clock (bpf_ktime_get_ns in seconds).
func monotonicSeconds(t testing.TB) uint32 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return uint32(ts.Sec)
}

// runIn runs a program on one packet from any goroutine, for tests that
// run it inside a network namespace.
func (h *dpHarness) runIn(prog string, pkt []byte) (uint32, []byte, error) {
	out := make([]byte, len(pkt)+256)
	opts := &ebpf.RunOptions{Data: pkt, DataOut: out, Repeat: 1}
	verdict, err := h.dp.Program(prog).Run(opts)
	return verdict, opts.DataOut, err
}
