package bpftest

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

// The IPv6 extension headers FragmentUDP puts before the fragment header
// of an IPv6 datagram: hop-by-hop options and destination options, each
// 8 bytes of padding, so that a parser must skip them to find L4.
const (
	ip6HopOpts  = 0
	ip6DstOpts  = 60
	ip6Fragment = 44
	ipProtoUDP  = 17
)

// FragmentUDP builds a UDP datagram from src to dst with payload bytes of
// data, its checksum right, as two fragments (Ethernet frames) with the
// fragment ID id: the first with the UDP header and 16 bytes, the second
// with the rest.
func FragmentUDP(t testing.TB, src, dst netip.AddrPort, id uint32, payload int) [][]byte {
	t.Helper()
	udp := make([]byte, 8+payload)
	binary.BigEndian.PutUint16(udp[0:], src.Port())
	binary.BigEndian.PutUint16(udp[2:], dst.Port())
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	for i := 8; i < len(udp); i++ {
		udp[i] = byte(i)
	}
	binary.BigEndian.PutUint16(udp[6:], UDPChecksum(src.Addr(), dst.Addr(), udp))
	const split = 24 // a multiple of 8
	return [][]byte{
		fragment(src.Addr(), dst.Addr(), id, 0, true, udp[:split]),
		fragment(src.Addr(), dst.Addr(), id, split, false, udp[split:]),
	}
}

func fragment(src, dst netip.Addr, id uint32, off int, more bool, data []byte) []byte {
	eth := []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00}
	fo := uint16(off / 8 << 3)
	if src.Is4() {
		ip := make([]byte, 20)
		ip[0], ip[8], ip[9] = 0x45, 64, ipProtoUDP
		binary.BigEndian.PutUint16(ip[2:], uint16(20+len(data)))
		binary.BigEndian.PutUint16(ip[4:], uint16(id))
		fo >>= 3
		if more {
			fo |= 0x2000
		}
		binary.BigEndian.PutUint16(ip[6:], fo)
		copy(ip[12:], src.AsSlice())
		copy(ip[16:], dst.AsSlice())
		binary.BigEndian.PutUint16(ip[10:], ^Sum(0, ip))
		return append(append(eth, ip...), data...)
	}
	eth[12], eth[13] = 0x86, 0xdd
	ext := make([]byte, 8+8+8) // hop-by-hop, destination options, fragment
	ext[0], ext[8], ext[16] = ip6DstOpts, ip6Fragment, ipProtoUDP
	ext[2], ext[3] = 1, 4 // a PadN option of 4 bytes fills each
	ext[10], ext[11] = 1, 4
	if more {
		fo |= 1
	}
	binary.BigEndian.PutUint16(ext[18:], fo)
	binary.BigEndian.PutUint32(ext[20:], id)
	ip := make([]byte, 40)
	ip[0], ip[6], ip[7] = 0x60, ip6HopOpts, 64
	binary.BigEndian.PutUint16(ip[4:], uint16(len(ext)+len(data)))
	copy(ip[8:], src.AsSlice())
	copy(ip[24:], dst.AsSlice())
	return append(append(append(eth, ip...), ext...), data...)
}

// Sum adds b to the one's complement sum s, folded to 16 bits.
func Sum(s uint32, b []byte) uint16 {
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// UDPChecksum is the checksum a UDP datagram (its own field zero) should
// carry between src and dst.
func UDPChecksum(src, dst netip.Addr, udp []byte) uint16 {
	var ph []byte
	if src.Is4() {
		ph = append(append(ph, src.AsSlice()...), dst.AsSlice()...)
		ph = append(ph, 0, ipProtoUDP, byte(len(udp)>>8), byte(len(udp)))
	} else {
		ph = append(append(ph, src.AsSlice()...), dst.AsSlice()...)
		ph = append(ph, 0, 0, byte(len(udp)>>8), byte(len(udp)), 0, 0, 0, ipProtoUDP)
	}
	c := make([]byte, len(udp))
	copy(c, udp)
	c[6], c[7] = 0, 0
	s := ^Sum(uint32(Sum(0, ph)), c)
	if s == 0 {
		s = 0xffff
	}
	return s
}
