package bpftest

import (
	"encoding/binary"
	"net/netip"
)

// ICMPError builds an Ethernet frame of an ICMP error from src to dst
// quoting quote (an IP packet): IPv4 "fragmentation needed" (MTU 1400),
// or ICMPv6 "packet too big" (MTU 1280); its checksums right.
func ICMPError(src, dst netip.Addr, quote []byte) []byte {
	eth := []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00}
	icmp := make([]byte, 8, 8+len(quote))
	icmp = append(icmp, quote...)
	if src.Is4() {
		icmp[0], icmp[1] = 3, 4
		binary.BigEndian.PutUint16(icmp[6:], 1400)
		binary.BigEndian.PutUint16(icmp[2:], ^Sum(0, icmp))
		ip := make([]byte, 20)
		ip[0], ip[8], ip[9] = 0x45, 64, 1
		binary.BigEndian.PutUint16(ip[2:], uint16(20+len(icmp)))
		copy(ip[12:], src.AsSlice())
		copy(ip[16:], dst.AsSlice())
		binary.BigEndian.PutUint16(ip[10:], ^Sum(0, ip))
		return append(append(eth, ip...), icmp...)
	}
	eth[12], eth[13] = 0x86, 0xdd
	icmp[0] = 2
	binary.BigEndian.PutUint32(icmp[4:], 1280)
	binary.BigEndian.PutUint16(icmp[2:], ^Sum(uint32(Sum(0, icmp6Pseudo(src, dst, len(icmp)))), icmp))
	ip := make([]byte, 40)
	ip[0], ip[6], ip[7] = 0x60, 58, 64
	binary.BigEndian.PutUint16(ip[4:], uint16(len(icmp)))
	copy(ip[8:], src.AsSlice())
	copy(ip[24:], dst.AsSlice())
	return append(append(eth, ip...), icmp...)
}

func icmp6Pseudo(src, dst netip.Addr, n int) []byte {
	ph := append(append([]byte{}, src.AsSlice()...), dst.AsSlice()...)
	return append(ph, 0, 0, byte(n>>8), byte(n), 0, 0, 0, 58)
}

// ICMPErrorParts splits a frame ICMPError built into its source and
// destination, whether its checksums (IPv4 header, ICMP) are right, and
// the packet it quotes.
func ICMPErrorParts(frame []byte) (src, dst netip.Addr, sumsOK bool, quote []byte) {
	if frame[12] == 0x08 {
		ip, icmp := frame[14:34], frame[34:]
		src, dst = netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
		return src, dst, Sum(0, ip) == 0xffff && Sum(0, icmp) == 0xffff, icmp[8:]
	}
	ip, icmp := frame[14:54], frame[54:]
	src, dst = netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40]))
	return src, dst, Sum(uint32(Sum(0, icmp6Pseudo(src, dst, len(icmp)))), icmp) == 0xffff, icmp[8:]
}
