package reconciler

import (
	"encoding/binary"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// v4InV6 is the prefix of an IPv4-mapped IPv6 address.
var v4InV6 = [12]byte{10: 0xff, 11: 0xff}

// keyOfServiceKey is keyOf(k.L3n4Addr()) made straight from the key's
// bytes, and whether bpf.NewServiceKey gives k back from it (no padding
// set, no scope bit that addrKey keeps for itself). Restore converts a
// million keys at 100,000 x 10, where making an lb.L3n4Addr of each and
// the key again from it cost 0.24 s.
func keyOfServiceKey(k bpf.ServiceKey) (addrKey, bool) {
	a := addrKey{addr: k.Addr, port: binary.BigEndian.Uint16(k.Port[:]), proto: lb.Protocol(k.Proto), scope: lb.Scope(k.Scope) | addrValid}
	if [12]byte(k.Addr[:12]) == v4InV6 {
		a.scope |= addrIs4
	}
	return a, k.Pad == [2]uint8{} && lb.Scope(k.Scope)&scopeFlags == 0
}
