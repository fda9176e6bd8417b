package lb

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Protocol is an L4 protocol, by its IANA number. The zero value is ANY.
type Protocol uint8

const (
	ProtoAny  Protocol = 0
	ProtoTCP  Protocol = 6
	ProtoUDP  Protocol = 17
	ProtoSCTP Protocol = 132
)

func (p Protocol) String() string {
	switch p {
	case ProtoAny:
		return "ANY"
	case ProtoTCP:
		return "TCP"
	case ProtoUDP:
		return "UDP"
	case ProtoSCTP:
		return "SCTP"
	}
	return "proto(" + strconv.Itoa(int(p)) + ")"
}

// ParseProtocol parses TCP, UDP, SCTP or ANY, in any case.
func ParseProtocol(s string) (Protocol, error) {
	switch strings.ToUpper(s) {
	case "TCP":
		return ProtoTCP, nil
	case "UDP":
		return ProtoUDP, nil
	case "SCTP":
		return ProtoSCTP, nil
	case "ANY":
		return ProtoAny, nil
	}
	return 0, fmt.Errorf("unknown protocol %q (want TCP, UDP, SCTP or ANY)", s)
}

func (p Protocol) MarshalText() ([]byte, error) { return []byte(p.String()), nil }
func (p *Protocol) UnmarshalText(b []byte) (err error) {
	*p, err = ParseProtocol(string(b))
	return
}

// Scope tells whether a frontend serves traffic from outside the cluster
// (external, the default) or from inside it (internal). A service with an
// external traffic policy of Local has both: the external frontend uses
// only this node's backends, the internal one uses all of them.
type Scope uint8

const (
	ScopeExternal Scope = 0
	ScopeInternal Scope = 1
)

func (s Scope) String() string {
	if s == ScopeInternal {
		return "internal"
	}
	return "external"
}

// L3n4Addr is an L3 address with an L4 port and protocol, and a scope.
// It is a small comparable value, usable as a map key. The zero value is
// invalid. IPv4-mapped IPv6 addresses are stored as plain IPv4, so each
// address has one form.
//
// The text form is "10.96.0.1:80/TCP" or "[2001:db8::1]:53/UDP", with "/i"
// appended for the internal scope: "10.96.0.1:80/TCP/i".
//
// It holds the address as 16 bytes and a family rather than a netip.Addr,
// whose zone is a pointer: 22 bytes without pointers instead of 32 with
// one, in every row, key and state that holds an address (Addr builds the
// netip.Addr on demand, without allocating). Zones are not supported
// (Validate rejects them), so a zoned address keeps only the fact that it
// had one.
type L3n4Addr struct {
	ip     [16]byte // the IPv6 form; IPv4 as ::ffff:a.b.c.d
	port   uint16
	family addrFamily
	proto  Protocol
	scope  Scope
}

// addrFamily is 0 for no address, familyV4 or familyV6, with zonedBit set
// for a zoned IPv6 address.
type addrFamily uint8

const (
	familyV4 addrFamily = 4
	familyV6 addrFamily = 6
	zonedBit addrFamily = 0x80
)

// NewL3n4Addr returns the address with the given parts.
func NewL3n4Addr(proto Protocol, addr netip.Addr, port uint16, scope Scope) L3n4Addr {
	a := L3n4Addr{port: port, proto: proto, scope: scope}
	addr = addr.Unmap()
	switch {
	case addr.Is4():
		a.family = familyV4
	case addr.Is6():
		a.family = familyV6
		if addr.Zone() != "" {
			a.family |= zonedBit
		}
	default:
		return a
	}
	a.ip = addr.As16()
	return a
}

// ParseL3n4Addr parses the text form, e.g. "10.96.0.1:80/TCP",
// "[2001:db8::1]:53/UDP" or "10.96.0.1:80/TCP/i".
func ParseL3n4Addr(s string) (L3n4Addr, error) {
	rest, scopeSuffix, hasScope := cutLast(s, "/")
	scope := ScopeExternal
	if hasScope && scopeSuffix == "i" {
		scope = ScopeInternal
	} else {
		rest = s
	}
	hostPort, protoStr, ok := cutLast(rest, "/")
	if !ok {
		return L3n4Addr{}, fmt.Errorf("address %q: missing protocol, want e.g. 10.0.0.1:80/TCP", s)
	}
	proto, err := ParseProtocol(protoStr)
	if err != nil {
		return L3n4Addr{}, fmt.Errorf("address %q: %w", s, err)
	}
	ap, err := netip.ParseAddrPort(hostPort)
	if err != nil {
		return L3n4Addr{}, fmt.Errorf("address %q: %w", s, err)
	}
	if ap.Addr().Zone() != "" {
		return L3n4Addr{}, fmt.Errorf("address %q: zoned IPv6 addresses are not supported", s)
	}
	return NewL3n4Addr(proto, ap.Addr(), ap.Port(), scope), nil
}

// MustParseL3n4Addr is ParseL3n4Addr that panics on error, for tests and
// constants.
func MustParseL3n4Addr(s string) L3n4Addr {
	a, err := ParseL3n4Addr(s)
	if err != nil {
		panic(err)
	}
	return a
}

func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

// Addr returns the IP address (without the zone of a zoned one).
func (a L3n4Addr) Addr() netip.Addr {
	switch a.family &^ zonedBit {
	case familyV4:
		return netip.AddrFrom4([4]byte(a.ip[12:]))
	case familyV6:
		return netip.AddrFrom16(a.ip)
	}
	return netip.Addr{}
}

// As16 returns the address in its 16-byte form (IPv4 as ::ffff:a.b.c.d),
// as Addr().As16() does, without making a netip.Addr: map keys are made
// of it once per backend (a tenth of a microsecond less each).
func (a L3n4Addr) As16() [16]byte { return a.ip }

func (a L3n4Addr) Port() uint16             { return a.port }
func (a L3n4Addr) Protocol() Protocol       { return a.proto }
func (a L3n4Addr) Scope() Scope             { return a.scope }
func (a L3n4Addr) IsValid() bool            { return a.family != 0 }
func (a L3n4Addr) Is4() bool                { return a.family == familyV4 }
func (a L3n4Addr) AddrPort() netip.AddrPort { return netip.AddrPortFrom(a.Addr(), a.port) }

// WithScope returns a copy of a with the given scope.
func (a L3n4Addr) WithScope(s Scope) L3n4Addr {
	a.scope = s
	return a
}

// WithPort returns a copy of a with the given port.
func (a L3n4Addr) WithPort(port uint16) L3n4Addr {
	a.port = port
	return a
}

func (a L3n4Addr) String() string {
	if !a.IsValid() {
		return "invalid"
	}
	b := make([]byte, 0, 64)
	return string(a.appendTo(b))
}

func (a L3n4Addr) appendTo(b []byte) []byte {
	b = a.AddrPort().AppendTo(b)
	b = append(b, '/')
	b = append(b, a.proto.String()...)
	if a.scope == ScopeInternal {
		b = append(b, "/i"...)
	}
	return b
}

func (a L3n4Addr) MarshalText() ([]byte, error) {
	if !a.IsValid() {
		return []byte{}, nil
	}
	return a.appendTo(nil), nil
}

func (a *L3n4Addr) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*a = L3n4Addr{}
		return nil
	}
	v, err := ParseL3n4Addr(string(b))
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// Validate reports what is wrong with a frontend or backend address.
func (a L3n4Addr) Validate() error {
	switch {
	case !a.IsValid():
		return errors.New("missing address")
	case a.Addr().IsUnspecified() && a.port == 0:
		return fmt.Errorf("%s: unspecified address needs a port", a)
	case a.family&zonedBit != 0:
		return fmt.Errorf("%s: zoned IPv6 addresses are not supported", a)
	}
	switch a.proto {
	case ProtoAny, ProtoTCP, ProtoUDP, ProtoSCTP:
	default:
		return fmt.Errorf("%s: unsupported protocol", a)
	}
	if a.scope > ScopeInternal {
		return fmt.Errorf("%s: unknown scope %d", a, a.scope)
	}
	return nil
}

// L3n4AddrKeyLen is the length of L3n4Addr.Key.
const L3n4AddrKeyLen = 1 + 16 + 2 + 1 + 1

// Key returns a fixed-size binary form that sorts the way Compare does:
// by family (IPv4 first), address, port, protocol and scope. It is the
// index key for frontends and backends.
func (a L3n4Addr) Key() []byte {
	return a.AppendKey(make([]byte, 0, L3n4AddrKeyLen))
}

// AppendKey appends the Key form of a to b.
func (a L3n4Addr) AppendKey(b []byte) []byte {
	b = append(b, byte(a.family&^zonedBit))
	b = append(b, a.ip[:]...)
	b = binary.BigEndian.AppendUint16(b, a.port)
	return append(b, byte(a.proto), byte(a.scope))
}

// Compare orders addresses: IPv4 before IPv6, then by address, port,
// protocol and scope.
func (a L3n4Addr) Compare(b L3n4Addr) int {
	if c := cmp.Compare(a.family&^zonedBit, b.family&^zonedBit); c != 0 {
		return c
	}
	if c := bytes.Compare(a.ip[:], b.ip[:]); c != 0 {
		return c
	}
	if c := cmp.Compare(a.family&zonedBit, b.family&zonedBit); c != 0 {
		return c
	}
	if c := cmp.Compare(a.port, b.port); c != 0 {
		return c
	}
	if c := cmp.Compare(a.proto, b.proto); c != 0 {
		return c
	}
	return cmp.Compare(a.scope, b.scope)
}
