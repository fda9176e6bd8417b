package bpftest

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/lbstate/lbstate/lb"
)

// Flow is a packet's addresses, ports and protocol.
type Flow struct {
	Src, Dst netip.AddrPort
	Proto    lb.Protocol
}

// NewFlow parses a flow's addresses.
func NewFlow(src, dst string, proto lb.Protocol) Flow {
	return Flow{netip.MustParseAddrPort(src), netip.MustParseAddrPort(dst), proto}
}

// Reply is the flow of the replies.
func (f Flow) Reply() Flow { return Flow{f.Dst, f.Src, f.Proto} }

// Packet builds an Ethernet frame of f with a payload of zeros, its
// checksums right; a TCP packet is a SYN.
func Packet(t testing.TB, f Flow, payload int) []byte {
	t.Helper()
	return TCPPacket(t, f, payload, "S")
}

// TCPPacket is Packet with the TCP flags given by letters: S (SYN), A
// (ACK), F (FIN), R (RST); "SA" is a SYN-ACK. A UDP flow ignores them.
func TCPPacket(t testing.TB, f Flow, payload int, flags string) []byte {
	t.Helper()
	return TCPPacketSeq(t, f, payload, flags, 1)
}

// TCPPacketSeq is TCPPacket with the sequence number seq: a client's new
// connection on a port starts with another one than the last.
func TCPPacketSeq(t testing.TB, f Flow, payload int, flags string, seq uint32) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}}
	var ip gopacket.NetworkLayer
	var ipLayer gopacket.SerializableLayer
	ipProto := layers.IPProtocolTCP
	if f.Proto == lb.ProtoUDP {
		ipProto = layers.IPProtocolUDP
	}
	if f.Src.Addr().Is4() {
		eth.EthernetType = layers.EthernetTypeIPv4
		ip4 := &layers.IPv4{Version: 4, TTL: 64, Protocol: ipProto, SrcIP: f.Src.Addr().AsSlice(), DstIP: f.Dst.Addr().AsSlice()}
		ip, ipLayer = ip4, ip4
	} else {
		eth.EthernetType = layers.EthernetTypeIPv6
		ip6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: ipProto, SrcIP: f.Src.Addr().AsSlice(), DstIP: f.Dst.Addr().AsSlice()}
		ip, ipLayer = ip6, ip6
	}
	var l4 gopacket.SerializableLayer
	if f.Proto == lb.ProtoUDP {
		udp := &layers.UDP{SrcPort: layers.UDPPort(f.Src.Port()), DstPort: layers.UDPPort(f.Dst.Port())}
		udp.SetNetworkLayerForChecksum(ip)
		l4 = udp
	} else {
		tcp := &layers.TCP{SrcPort: layers.TCPPort(f.Src.Port()), DstPort: layers.TCPPort(f.Dst.Port()), Seq: seq, Window: 1024}
		for _, c := range flags {
			switch c {
			case 'S':
				tcp.SYN = true
			case 'A':
				tcp.ACK = true
			case 'F':
				tcp.FIN = true
			case 'R':
				tcp.RST = true
			default:
				t.Fatalf("TCP flag %q: want S, A, F or R", c)
			}
		}
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

// Decode parses a packet, failing the test unless its IPv4 header and L4
// checksums are right (an IPv4 UDP checksum of 0, none, is).
func Decode(t testing.TB, pkt []byte) Flow {
	t.Helper()
	// Only the headers: gopacket would guess a payload's protocol from
	// the port.
	var (
		eth     layers.Ethernet
		ip4     layers.IPv4
		ip6     layers.IPv6
		tcp     layers.TCP
		udp     layers.UDP
		payload gopacket.Payload
		decoded []gopacket.LayerType
	)
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip4, &ip6, &tcp, &udp, &payload)
	parser.IgnoreUnsupported = true
	if err := parser.DecodeLayers(pkt, &decoded); err != nil {
		t.Fatalf("undecodable packet: %v", err)
	}
	var (
		f       Flow
		pseudo  []byte
		l4      []byte
		network gopacket.NetworkLayer
		l4layer gopacket.TransportLayer
	)
	for _, lt := range decoded {
		switch lt {
		case layers.LayerTypeIPv4:
			network = &ip4
		case layers.LayerTypeIPv6:
			network = &ip6
		case layers.LayerTypeTCP:
			l4layer = &tcp
		case layers.LayerTypeUDP:
			l4layer = &udp
		}
	}
	switch ip := network.(type) {
	case *layers.IPv4:
		if sum := onesSum(0, ip.Contents); sum != 0xffff {
			t.Errorf("IPv4 header checksum wrong (sum %#x)", sum)
		}
		src, _ := netip.AddrFromSlice(ip.SrcIP)
		dst, _ := netip.AddrFromSlice(ip.DstIP)
		f.Src, f.Dst = netip.AddrPortFrom(src, 0), netip.AddrPortFrom(dst, 0)
		pseudo = append(append(append([]byte{}, ip.SrcIP.To4()...), ip.DstIP.To4()...), 0, byte(ip.Protocol), byte(len(ip.Payload)>>8), byte(len(ip.Payload)))
		l4 = ip.Payload
	case *layers.IPv6:
		src, _ := netip.AddrFromSlice(ip.SrcIP)
		dst, _ := netip.AddrFromSlice(ip.DstIP)
		f.Src, f.Dst = netip.AddrPortFrom(src, 0), netip.AddrPortFrom(dst, 0)
		pseudo = append(append(append([]byte{}, ip.SrcIP...), ip.DstIP...), 0, 0, byte(len(ip.Payload)>>8), byte(len(ip.Payload)), 0, 0, 0, byte(ip.NextHeader))
		l4 = ip.Payload
	default:
		t.Fatalf("no IP layer in %x", pkt)
	}
	switch l := l4layer.(type) {
	case *layers.TCP:
		f.Proto = lb.ProtoTCP
		f.Src, f.Dst = netip.AddrPortFrom(f.Src.Addr(), uint16(l.SrcPort)), netip.AddrPortFrom(f.Dst.Addr(), uint16(l.DstPort))
	case *layers.UDP:
		f.Proto = lb.ProtoUDP
		f.Src, f.Dst = netip.AddrPortFrom(f.Src.Addr(), uint16(l.SrcPort)), netip.AddrPortFrom(f.Dst.Addr(), uint16(l.DstPort))
		if l.Checksum == 0 && f.Src.Addr().Is4() {
			return f // no checksum, which IPv4 allows
		}
	default:
		t.Fatalf("no TCP or UDP layer in %x", pkt)
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

// Send runs prog (a tc program) on a packet of f and returns its verdict
// and the packet's flow after, checking its checksums.
func Send(t testing.TB, prog *ebpf.Program, f Flow) (uint32, Flow) {
	t.Helper()
	pkt := Packet(t, f, 32)
	out := make([]byte, len(pkt)+256)
	opts := &ebpf.RunOptions{Data: pkt, DataOut: out, Repeat: 1}
	verdict, err := prog.Run(opts)
	if err != nil {
		t.Fatalf("running %v on %v: %v", prog, f, err)
	}
	return verdict, Decode(t, opts.DataOut)
}

// FlowRunner sends many flows to one frontend through a tc program
// quickly: one template packet with only the client's address and port
// rewritten (the datapath does not check checksums on the way in) and
// only the destination read back.
type FlowRunner struct {
	prog     *ebpf.Program
	pkt, out []byte
	opts     ebpf.RunOptions
	v4       bool
}

// NewFlowRunner returns a runner of flows to frontend over proto.
func NewFlowRunner(t testing.TB, prog *ebpf.Program, frontend netip.AddrPort, proto lb.Protocol) *FlowRunner {
	client := netip.MustParseAddrPort("[2001:db8::1]:1")
	if frontend.Addr().Is4() {
		client = netip.MustParseAddrPort("192.0.2.1:1")
	}
	r := &FlowRunner{prog: prog, pkt: Packet(t, Flow{client, frontend, proto}, 0), v4: frontend.Addr().Is4()}
	r.out = make([]byte, len(r.pkt)+256)
	return r
}

// Run sends the first packet of a flow from client (of the frontend's
// family) and returns the verdict and the packet's destination after.
func (r *FlowRunner) Run(client netip.AddrPort) (uint32, netip.AddrPort, error) {
	src, dst, l4 := 26, 30, 34 // offsets in an IPv4 frame
	if !r.v4 {
		src, dst, l4 = 22, 38, 54
	}
	copy(r.pkt[src:dst], client.Addr().AsSlice())
	binary.BigEndian.PutUint16(r.pkt[l4:], client.Port())
	r.opts = ebpf.RunOptions{Data: r.pkt, DataOut: r.out, Repeat: 1}
	verdict, err := r.prog.Run(&r.opts)
	if err != nil {
		return 0, netip.AddrPort{}, err
	}
	out := r.opts.DataOut
	addr, _ := netip.AddrFromSlice(out[dst : dst+(dst-src)])
	return verdict, netip.AddrPortFrom(addr, binary.BigEndian.Uint16(out[l4+2:])), nil
}
