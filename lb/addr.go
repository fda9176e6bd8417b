package lb

import (
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
type L3n4Addr struct {
	addr  netip.Addr
	port  uint16
	proto Protocol
	scope Scope
}

// NewL3n4Addr returns the address with the given parts.
func NewL3n4Addr(proto Protocol, addr netip.Addr, port uint16, scope Scope) L3n4Addr {
	return L3n4Addr{addr: addr.Unmap(), port: port, proto: proto, scope: scope}
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

func (a L3n4Addr) Addr() netip.Addr         { return a.addr }
func (a L3n4Addr) Port() uint16             { return a.port }
func (a L3n4Addr) Protocol() Protocol       { return a.proto }
func (a L3n4Addr) Scope() Scope             { return a.scope }
func (a L3n4Addr) IsValid() bool            { return a.addr.IsValid() }
func (a L3n4Addr) AddrPort() netip.AddrPort { return netip.AddrPortFrom(a.addr, a.port) }

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
	if !a.addr.IsValid() {
		return "invalid"
	}
	b := make([]byte, 0, 64)
	return string(a.appendTo(b))
}

func (a L3n4Addr) appendTo(b []byte) []byte {
	b = netip.AddrPortFrom(a.addr, a.port).AppendTo(b)
	b = append(b, '/')
	b = append(b, a.proto.String()...)
	if a.scope == ScopeInternal {
		b = append(b, "/i"...)
	}
	return b
}

func (a L3n4Addr) MarshalText() ([]byte, error) {
	if !a.addr.IsValid() {
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
	case !a.addr.IsValid():
		return errors.New("missing address")
	case a.addr.IsUnspecified() && a.port == 0:
		return fmt.Errorf("%s: unspecified address needs a port", a)
	case a.addr.Zone() != "":
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
	family := byte(0)
	switch {
	case a.addr.Is4():
		family = 4
	case a.addr.Is6():
		family = 6
	}
	a16 := a.addr.As16()
	b = append(b, family)
	b = append(b, a16[:]...)
	b = binary.BigEndian.AppendUint16(b, a.port)
	return append(b, byte(a.proto), byte(a.scope))
}

// Compare orders addresses: IPv4 before IPv6, then by address, port,
// protocol and scope.
func (a L3n4Addr) Compare(b L3n4Addr) int {
	if c := a.addr.Compare(b.addr); c != 0 {
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
