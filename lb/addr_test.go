package lb_test

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/lbstate/lbstate/lb"
)

// wantErr fails the test unless err is non-nil and its text contains every
// one of subs.
func wantErr(t *testing.T, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", subs)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %q", err, s)
		}
	}
}

func TestParseL3n4Addr(t *testing.T) {
	tests := []struct {
		in     string
		proto  lb.Protocol
		addr   string
		port   uint16
		scope  lb.Scope
		String string
	}{
		{"10.96.0.1:80/TCP", lb.ProtoTCP, "10.96.0.1", 80, lb.ScopeExternal, "10.96.0.1:80/TCP"},
		{"10.96.0.1:53/UDP", lb.ProtoUDP, "10.96.0.1", 53, lb.ScopeExternal, "10.96.0.1:53/UDP"},
		{"10.96.0.1:3868/SCTP", lb.ProtoSCTP, "10.96.0.1", 3868, lb.ScopeExternal, "10.96.0.1:3868/SCTP"},
		{"10.96.0.1:80/ANY", lb.ProtoAny, "10.96.0.1", 80, lb.ScopeExternal, "10.96.0.1:80/ANY"},
		{"10.96.0.1:80/tcp", lb.ProtoTCP, "10.96.0.1", 80, lb.ScopeExternal, "10.96.0.1:80/TCP"},
		{"10.96.0.1:80/uDp", lb.ProtoUDP, "10.96.0.1", 80, lb.ScopeExternal, "10.96.0.1:80/UDP"},
		{"10.96.0.1:80/sctp", lb.ProtoSCTP, "10.96.0.1", 80, lb.ScopeExternal, "10.96.0.1:80/SCTP"},
		{"10.96.0.1:80/any", lb.ProtoAny, "10.96.0.1", 80, lb.ScopeExternal, "10.96.0.1:80/ANY"},
		{"10.96.0.1:0/TCP", lb.ProtoTCP, "10.96.0.1", 0, lb.ScopeExternal, "10.96.0.1:0/TCP"},
		{"10.96.0.1:65535/TCP", lb.ProtoTCP, "10.96.0.1", 65535, lb.ScopeExternal, "10.96.0.1:65535/TCP"},
		{"10.96.0.1:080/TCP", lb.ProtoTCP, "10.96.0.1", 80, lb.ScopeExternal, "10.96.0.1:80/TCP"},
		{"0.0.0.0:30000/TCP/i", lb.ProtoTCP, "0.0.0.0", 30000, lb.ScopeInternal, "0.0.0.0:30000/TCP/i"},
		{"10.96.0.1:80/tcp/i", lb.ProtoTCP, "10.96.0.1", 80, lb.ScopeInternal, "10.96.0.1:80/TCP/i"},
		{"[2001:db8::1]:53/UDP", lb.ProtoUDP, "2001:db8::1", 53, lb.ScopeExternal, "[2001:db8::1]:53/UDP"},
		{"[2001:DB8:0:0::1]:53/UDP", lb.ProtoUDP, "2001:db8::1", 53, lb.ScopeExternal, "[2001:db8::1]:53/UDP"},
		{"[fd00::1]:443/TCP/i", lb.ProtoTCP, "fd00::1", 443, lb.ScopeInternal, "[fd00::1]:443/TCP/i"},
		{"[::]:8080/ANY", lb.ProtoAny, "::", 8080, lb.ScopeExternal, "[::]:8080/ANY"},
		// IPv4-mapped IPv6 is stored and printed as IPv4.
		{"[::ffff:10.0.0.1]:80/TCP", lb.ProtoTCP, "10.0.0.1", 80, lb.ScopeExternal, "10.0.0.1:80/TCP"},
		{"[::ffff:a00:1]:80/UDP/i", lb.ProtoUDP, "10.0.0.1", 80, lb.ScopeInternal, "10.0.0.1:80/UDP/i"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			a, err := lb.ParseL3n4Addr(tt.in)
			if err != nil {
				t.Fatalf("ParseL3n4Addr: %v", err)
			}
			want := netip.MustParseAddr(tt.addr)
			if a.Addr() != want {
				t.Errorf("Addr() = %v, want %v", a.Addr(), want)
			}
			if a.Port() != tt.port {
				t.Errorf("Port() = %d, want %d", a.Port(), tt.port)
			}
			if a.Protocol() != tt.proto {
				t.Errorf("Protocol() = %v, want %v", a.Protocol(), tt.proto)
			}
			if a.Scope() != tt.scope {
				t.Errorf("Scope() = %v, want %v", a.Scope(), tt.scope)
			}
			if !a.IsValid() {
				t.Errorf("IsValid() = false")
			}
			if a.AddrPort() != netip.AddrPortFrom(want, tt.port) {
				t.Errorf("AddrPort() = %v", a.AddrPort())
			}
			if got := a.String(); got != tt.String {
				t.Errorf("String() = %q, want %q", got, tt.String)
			}
			text, err := a.MarshalText()
			if err != nil || string(text) != tt.String {
				t.Errorf("MarshalText() = %q, %v; want %q", text, err, tt.String)
			}
			var u lb.L3n4Addr
			if err := u.UnmarshalText([]byte(tt.in)); err != nil || u != a {
				t.Errorf("UnmarshalText(%q) = %v, %v; want %v", tt.in, u, err, a)
			}
			if b := lb.MustParseL3n4Addr(tt.String); b != a {
				t.Errorf("String does not parse back: %v != %v", b, a)
			}
			want16 := lb.NewL3n4Addr(tt.proto, want, tt.port, tt.scope)
			if want16 != a {
				t.Errorf("NewL3n4Addr gives %v, want %v", want16, a)
			}
		})
	}
}

func TestParseL3n4AddrErrors(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"10.0.0.1:80", []string{`"10.0.0.1:80"`, "missing protocol"}},
		{"10.0.0.1:80/i", []string{`"10.0.0.1:80/i"`, "missing protocol"}},
		{"", []string{"missing protocol"}},
		{"10.0.0.1:80/FOO", []string{`"10.0.0.1:80/FOO"`, `unknown protocol "FOO"`}},
		{"10.0.0.1:80/", []string{`unknown protocol ""`}},
		{"10.0.0.1:80/TCP/x", []string{`unknown protocol "x"`}},
		{"10.0.0.1:80/TCP/I", []string{`unknown protocol "I"`}},
		{"10.0.0.1:80/i/TCP", []string{`"10.0.0.1:80/i/TCP"`}},
		{"10.0.0.1:65536/TCP", []string{`"10.0.0.1:65536/TCP"`, "port"}},
		{"10.0.0.1:-1/TCP", []string{"port"}},
		{"10.0.0.1:http/TCP", []string{"port"}},
		{"10.0.0.1:/TCP", []string{`"10.0.0.1:/TCP"`}},
		{"10.0.0.1/TCP", []string{`"10.0.0.1/TCP"`}},
		{"[fe80::1%eth0]:80/TCP", []string{`"[fe80::1%eth0]:80/TCP"`, "zoned"}},
		{"[fe80::1%eth0]:80/TCP/i", []string{"zoned"}},
		{"2001:db8::1:80/TCP", []string{`"2001:db8::1:80/TCP"`}},
		{"[10.0.0.1]:80/TCP", []string{`"[10.0.0.1]:80/TCP"`}},
		{"010.0.0.1:80/TCP", []string{`"010.0.0.1:80/TCP"`}},
		{"256.0.0.1:80/TCP", []string{`"256.0.0.1:80/TCP"`}},
		{"garbage", []string{`"garbage"`}},
		{"foo.example:80/TCP", []string{`"foo.example:80/TCP"`}},
		{" 10.0.0.1:80/TCP", []string{`" 10.0.0.1:80/TCP"`}},
		{"invalid", []string{`"invalid"`}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			a, err := lb.ParseL3n4Addr(tt.in)
			wantErr(t, err, tt.want...)
			if a != (lb.L3n4Addr{}) {
				t.Errorf("got %v with the error, want the zero value", a)
			}
			var u lb.L3n4Addr
			if tt.in != "" {
				if err := u.UnmarshalText([]byte(tt.in)); err == nil {
					t.Errorf("UnmarshalText(%q) succeeded with %v", tt.in, u)
				}
			}
		})
	}
}

func TestMustParseL3n4AddrPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("MustParseL3n4Addr did not panic on bad input")
		}
	}()
	lb.MustParseL3n4Addr("10.0.0.1:80")
}

func TestParseProtocol(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want lb.Protocol
	}{
		{"TCP", lb.ProtoTCP}, {"tcp", lb.ProtoTCP}, {"Udp", lb.ProtoUDP},
		{"SCTP", lb.ProtoSCTP}, {"any", lb.ProtoAny}, {"ANY", lb.ProtoAny},
	} {
		got, err := lb.ParseProtocol(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseProtocol(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
		text, _ := got.MarshalText()
		if string(text) != strings.ToUpper(tt.in) {
			t.Errorf("MarshalText(%v) = %q, want %q", got, text, strings.ToUpper(tt.in))
		}
		var u lb.Protocol
		if err := u.UnmarshalText([]byte(tt.in)); err != nil || u != tt.want {
			t.Errorf("UnmarshalText(%q) = %v, %v", tt.in, u, err)
		}
	}
	for _, bad := range []string{"", "ICMP", "tcp ", "6"} {
		_, err := lb.ParseProtocol(bad)
		wantErr(t, err, "unknown protocol", `"`+bad+`"`, "TCP, UDP, SCTP or ANY")
	}
	if got := lb.Protocol(1).String(); got != "proto(1)" {
		t.Errorf("Protocol(1).String() = %q", got)
	}
}

func TestL3n4AddrZeroValue(t *testing.T) {
	var a lb.L3n4Addr
	if a.IsValid() {
		t.Error("zero value IsValid")
	}
	if got := a.String(); got != "invalid" {
		t.Errorf("zero value String() = %q, want %q", got, "invalid")
	}
	wantErr(t, a.Validate(), "missing address")
	text, err := a.MarshalText()
	if err != nil || len(text) != 0 {
		t.Errorf("zero value MarshalText() = %q, %v; want empty", text, err)
	}
	u := lb.MustParseL3n4Addr("10.0.0.1:80/TCP")
	if err := u.UnmarshalText(nil); err != nil || u != a {
		t.Errorf("UnmarshalText(empty) = %v, %v; want the zero value", u, err)
	}
}

func TestL3n4AddrJSON(t *testing.T) {
	type wrapper struct {
		A lb.L3n4Addr `json:"a"`
		B lb.L3n4Addr `json:"b"`
	}
	in := wrapper{A: lb.MustParseL3n4Addr("[2001:db8::1]:53/udp/i")}
	out, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":"[2001:db8::1]:53/UDP/i","b":""}`; string(out) != want {
		t.Errorf("json.Marshal = %s, want %s", out, want)
	}
	var back wrapper
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	if back != in {
		t.Errorf("round trip gave %+v, want %+v", back, in)
	}
	if err := json.Unmarshal([]byte(`{"a":"10.0.0.1:80"}`), &back); err == nil {
		t.Error("json.Unmarshal accepted an address without protocol")
	}
}

func TestL3n4AddrValidate(t *testing.T) {
	v4 := netip.MustParseAddr("10.0.0.1")
	tests := []struct {
		name string
		a    lb.L3n4Addr
		want string // "" for valid
	}{
		{"tcp", lb.MustParseL3n4Addr("10.0.0.1:80/TCP"), ""},
		{"any proto", lb.MustParseL3n4Addr("10.0.0.1:80/ANY"), ""},
		{"port 0", lb.MustParseL3n4Addr("10.0.0.1:0/TCP"), ""},
		{"internal", lb.MustParseL3n4Addr("[fd00::1]:80/SCTP/i"), ""},
		{"unspecified with port", lb.MustParseL3n4Addr("0.0.0.0:30000/TCP"), ""},
		{"zero", lb.L3n4Addr{}, "missing address"},
		{"unspecified v4 no port", lb.MustParseL3n4Addr("0.0.0.0:0/TCP"), "unspecified address needs a port"},
		{"unspecified v6 no port", lb.MustParseL3n4Addr("[::]:0/UDP"), "unspecified address needs a port"},
		{"zoned", lb.NewL3n4Addr(lb.ProtoTCP, netip.MustParseAddr("fe80::1%eth0"), 80, lb.ScopeExternal), "zoned"},
		{"bad proto", lb.NewL3n4Addr(lb.Protocol(1), v4, 80, lb.ScopeExternal), "unsupported protocol"},
		{"bad scope", lb.NewL3n4Addr(lb.ProtoTCP, v4, 80, lb.Scope(2)), "unknown scope 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.a.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate(%v) = %v, want nil", tt.a, err)
				}
				return
			}
			wantErr(t, err, tt.want)
		})
	}
}

func TestL3n4AddrWith(t *testing.T) {
	a := lb.MustParseL3n4Addr("10.0.0.1:80/TCP")
	if got := a.WithScope(lb.ScopeInternal); got != lb.MustParseL3n4Addr("10.0.0.1:80/TCP/i") {
		t.Errorf("WithScope = %v", got)
	}
	if got := a.WithPort(8080); got != lb.MustParseL3n4Addr("10.0.0.1:8080/TCP") {
		t.Errorf("WithPort = %v", got)
	}
	if a != lb.MustParseL3n4Addr("10.0.0.1:80/TCP") {
		t.Errorf("With* modified the receiver: %v", a)
	}
	if lb.ScopeInternal.String() != "internal" || lb.ScopeExternal.String() != "external" {
		t.Errorf("Scope.String: %q, %q", lb.ScopeInternal, lb.ScopeExternal)
	}
}

func TestNewL3n4AddrUnmaps(t *testing.T) {
	mapped := lb.NewL3n4Addr(lb.ProtoTCP, netip.MustParseAddr("::ffff:10.0.0.1"), 80, lb.ScopeExternal)
	plain := lb.NewL3n4Addr(lb.ProtoTCP, netip.MustParseAddr("10.0.0.1"), 80, lb.ScopeExternal)
	if mapped != plain {
		t.Errorf("NewL3n4Addr(::ffff:10.0.0.1) = %v, want %v", mapped, plain)
	}
	if !mapped.Addr().Is4() {
		t.Errorf("Addr() = %v, want IPv4", mapped.Addr())
	}
	if !bytes.Equal(mapped.Key(), plain.Key()) {
		t.Error("keys differ")
	}
}

// keySample is a set of distinct valid addresses that differ from
// 10.0.0.1:80/TCP in one part each.
var keySample = []string{
	"10.0.0.1:80/TCP",
	"10.0.0.1:81/TCP",
	"10.0.0.1:0/TCP",
	"10.0.0.1:80/UDP",
	"10.0.0.1:80/SCTP",
	"10.0.0.1:80/ANY",
	"10.0.0.1:80/TCP/i",
	"10.0.0.1:80/UDP/i",
	"10.0.0.2:80/TCP",
	"0.0.0.0:80/TCP",
	"255.255.255.255:80/TCP",
	"[::1]:80/TCP",
	"[::]:80/TCP",
	"[::a00:1]:80/TCP", // ::10.0.0.1, not IPv4-mapped
	"[2001:db8::1]:80/TCP",
	"[2001:db8::1]:80/TCP/i",
	"[2001:db8::1]:8080/TCP",
	"[ffff::1]:80/TCP",
}

func TestL3n4AddrKey(t *testing.T) {
	keys := map[string]string{}
	for _, s := range keySample {
		a := lb.MustParseL3n4Addr(s)
		k := a.Key()
		if len(k) != lb.L3n4AddrKeyLen {
			t.Errorf("len(Key(%s)) = %d, want %d", s, len(k), lb.L3n4AddrKeyLen)
		}
		if other, dup := keys[string(k)]; dup {
			t.Errorf("Key(%s) == Key(%s)", s, other)
		}
		keys[string(k)] = s

		// Equal values, built separately, have equal keys.
		b := lb.NewL3n4Addr(a.Protocol(), netip.MustParseAddr(a.Addr().String()), a.Port(), a.Scope())
		if !bytes.Equal(b.Key(), k) {
			t.Errorf("Key(%s) differs between equal values: %x vs %x", s, k, b.Key())
		}
		prefix := []byte("prefix")
		if got := a.AppendKey(prefix); !bytes.Equal(got, append([]byte("prefix"), k...)) {
			t.Errorf("AppendKey(%s) = %x", s, got)
		}
	}
	// Keys sort like Compare, across families too.
	for _, x := range keySample {
		for _, y := range keySample {
			a, b := lb.MustParseL3n4Addr(x), lb.MustParseL3n4Addr(y)
			if got, want := bytes.Compare(a.Key(), b.Key()), a.Compare(b); got != want {
				t.Errorf("Key order of %s vs %s is %d, Compare says %d", a, b, got, want)
			}
		}
	}
	// The zero value's key collides with no valid address.
	if _, dup := keys[string(lb.L3n4Addr{}.Key())]; dup {
		t.Errorf("the zero value's key equals a valid address's key")
	}
}

func TestL3n4AddrCompare(t *testing.T) {
	var addrs []lb.L3n4Addr
	for _, s := range keySample {
		addrs = append(addrs, lb.MustParseL3n4Addr(s))
	}
	addrs = append(addrs, lb.L3n4Addr{})
	for _, a := range addrs {
		for _, b := range addrs {
			ab, ba := a.Compare(b), b.Compare(a)
			if ab != -ba {
				t.Errorf("Compare(%v, %v) = %d but Compare(%v, %v) = %d", a, b, ab, b, a, ba)
			}
			if (ab == 0) != (a == b) {
				t.Errorf("Compare(%v, %v) = %d, but == is %v", a, b, ab, a == b)
			}
			for _, c := range addrs {
				if ab < 0 && b.Compare(c) < 0 && a.Compare(c) >= 0 {
					t.Errorf("Compare not transitive: %v < %v < %v", a, b, c)
				}
			}
		}
	}
	ordered := []string{
		"10.0.0.1:80/TCP", "10.0.0.1:80/TCP/i", "10.0.0.1:80/UDP", "10.0.0.1:81/ANY",
		"10.0.0.2:1/ANY", "[::]:80/TCP", "[2001:db8::1]:1/TCP",
	}
	for i := 1; i < len(ordered); i++ {
		a, b := lb.MustParseL3n4Addr(ordered[i-1]), lb.MustParseL3n4Addr(ordered[i])
		if a.Compare(b) >= 0 {
			t.Errorf("Compare(%v, %v) = %d, want < 0", a, b, a.Compare(b))
		}
	}
}

func FuzzParseL3n4Addr(f *testing.F) {
	for _, s := range keySample {
		f.Add(s)
	}
	for _, s := range []string{
		"", "/", "/i", "//i", "garbage", "10.0.0.1:80", "10.0.0.1:80/tcp/i",
		"[::ffff:10.0.0.1]:80/udp", "[fe80::1%eth0]:80/TCP", "[fe80::1%a/b]:80/TCP",
		"10.0.0.1:65536/TCP", "10.0.0.1:0080/sctp/i", "[::]:0/any", "10.0.0.1:80/TCP/i/i",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := lb.ParseL3n4Addr(s)
		if err != nil {
			if a != (lb.L3n4Addr{}) {
				t.Fatalf("ParseL3n4Addr(%q) returned %v with error %v", s, a, err)
			}
			return
		}
		if !a.IsValid() {
			t.Fatalf("ParseL3n4Addr(%q) = invalid address without error", s)
		}
		printed := a.String()
		b, err := lb.ParseL3n4Addr(printed)
		if err != nil {
			t.Fatalf("ParseL3n4Addr(%q) = %v, whose String %q does not parse: %v", s, a, printed, err)
		}
		if b != a {
			t.Fatalf("ParseL3n4Addr(%q) = %v, String %q parses to %v", s, a, printed, b)
		}
		if again := b.String(); again != printed {
			t.Fatalf("printing is not stable: %q then %q", printed, again)
		}
		if text, _ := a.MarshalText(); string(text) != printed {
			t.Fatalf("MarshalText = %q, String = %q", text, printed)
		}
		if a.Compare(b) != 0 || !bytes.Equal(a.Key(), b.Key()) {
			t.Fatalf("equal values %v compare or key differently", a)
		}
	})
}

// An address is a pointer-free value no larger than 24 bytes, so that the
// rows, keys and states holding one stay small and the GC need not scan it.
func TestL3n4AddrIsSmallAndPointerFree(t *testing.T) {
	typ := reflect.TypeFor[lb.L3n4Addr]()
	if typ.Size() > 24 {
		t.Errorf("L3n4Addr is %d bytes, want at most 24", typ.Size())
	}
	for i := range typ.NumField() {
		switch k := typ.Field(i).Type.Kind(); k {
		case reflect.Pointer, reflect.String, reflect.Slice, reflect.Map, reflect.Interface, reflect.Struct:
			t.Errorf("field %s is a %s, want a plain value", typ.Field(i).Name, k)
		}
	}
}

// The families stay apart: 0.0.0.0 and :: are different addresses, and
// Addr gives back what the address was made from.
func TestL3n4AddrKeepsFamilies(t *testing.T) {
	for _, s := range []string{"0.0.0.0", "::", "10.0.0.1", "::ffff:10.0.0.1", "2001:db8::1"} {
		ip := netip.MustParseAddr(s)
		a := lb.NewL3n4Addr(lb.ProtoTCP, ip, 80, lb.ScopeExternal)
		if got := a.Addr(); got != ip.Unmap() {
			t.Errorf("%s: Addr() = %s, want %s", s, got, ip.Unmap())
		}
		if a.Is4() != ip.Unmap().Is4() {
			t.Errorf("%s: Is4() = %v, want %v", s, a.Is4(), ip.Unmap().Is4())
		}
	}
	if zoned := lb.NewL3n4Addr(lb.ProtoTCP, netip.MustParseAddr("fe80::1%eth0"), 80, lb.ScopeExternal); zoned.Is4() {
		t.Errorf("%s: Is4() = true", zoned)
	}
	if (lb.L3n4Addr{}).Is4() {
		t.Error("the zero address: Is4() = true")
	}
	v4 := lb.NewL3n4Addr(lb.ProtoTCP, netip.IPv4Unspecified(), 80, lb.ScopeExternal)
	v6 := lb.NewL3n4Addr(lb.ProtoTCP, netip.IPv6Unspecified(), 80, lb.ScopeExternal)
	if v4 == v6 || v4.Compare(v6) >= 0 {
		t.Errorf("0.0.0.0 and :: compare %d (equal: %v), want IPv4 first", v4.Compare(v6), v4 == v6)
	}
}

// As16 gives the bytes Addr().As16() gives, for every family and for
// no address: the reconciler keys backends by it.
func TestL3n4AddrAs16IsAddrAs16(t *testing.T) {
	for _, a := range []lb.L3n4Addr{
		{},
		lb.MustParseL3n4Addr("10.96.0.1:80/TCP"),
		lb.MustParseL3n4Addr("0.0.0.0:30000/UDP"),
		lb.MustParseL3n4Addr("[2001:db8::1]:443/TCP"),
		lb.MustParseL3n4Addr("[::ffff:10.0.0.1]:80/TCP"), // unmapped: IPv4
		lb.NewL3n4Addr(lb.ProtoTCP, netip.MustParseAddr("fe80::1%eth0"), 80, lb.ScopeExternal),
	} {
		if got, want := a.As16(), a.Addr().As16(); got != want {
			t.Errorf("%s: As16 %x, Addr().As16() %x", a, got, want)
		}
	}
}
