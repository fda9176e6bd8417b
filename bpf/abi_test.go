package bpf

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/lbstate/lbstate/lb"
)

// abiPairs are the Go structs of include/lb.h, each with the type bpf2go
// generated for its C struct, and that struct's name.
var abiPairs = []struct {
	ours, generated any
	c               string
}{
	{ServiceKey{}, lbLbServiceKey{}, "lb_service_key"},
	{ServiceValue{}, lbLbServiceValue{}, "lb_service_value"},
	{Backend{}, lbLbBackend{}, "lb_backend"},
	{RevNatValue{}, lbLbRevNatValue{}, "lb_rev_nat_value"},
	{AffinityKey{}, lbLbAffinityKey{}, "lb_affinity_key"},
	{AffinityValue{}, lbLbAffinityValue{}, "lb_affinity_value"},
	{SourceRangeKey{}, lbLbSrcRangeKey{}, "lb_src_range_key"},
	{CTKey{}, lbLbCtKey{}, "lb_ct_key"},
	{CTValue{}, lbLbCtValue{}, "lb_ct_value"},
	{CounterKey{}, lbLbCounterKey{}, "lb_counter_key"},
	{CounterValue{}, lbLbCounterValue{}, "lb_counter_value"},
	{DropKey{}, lbLbDropKey{}, "lb_drop_key"},
	{FlowSeed{}, lbLbFlowSeedValue{}, "lb_flow_seed_value"},
}

// TestABIMatchesC checks every Go struct against the type bpf2go derived
// from the BTF that clang emitted for include/lb.h: the same size, and the
// same fields (by name, in order) at the same offsets with the same sizes.
// The generated types come from the committed object, so the test needs no
// clang; .ci/run regenerates them when clang is there, so a changed lb.h
// cannot slip past with stale bindings.
func TestABIMatchesC(t *testing.T) {
	for _, pair := range abiPairs {
		ours, gen := reflect.TypeOf(pair.ours), reflect.TypeOf(pair.generated)
		t.Run(ours.Name(), func(t *testing.T) {
			if ours.Size() != gen.Size() {
				t.Fatalf("size %d, C has %d", ours.Size(), gen.Size())
			}
			var cFields []reflect.StructField
			for i := range gen.NumField() {
				if f := gen.Field(i); f.Name != "_" {
					cFields = append(cFields, f)
				}
			}
			oFields := flatFields(ours, 0)
			if len(oFields) != len(cFields) {
				t.Fatalf("%d fields, C has %d", len(oFields), len(cFields))
			}
			for i, cf := range cFields {
				of := oFields[i]
				if !strings.EqualFold(of.Name, cf.Name) {
					t.Errorf("field %d is %s, C has %s", i, of.Name, cf.Name)
				}
				if of.Offset != cf.Offset || of.Type.Size() != cf.Type.Size() {
					t.Errorf("field %s at %d (size %d), C has it at %d (size %d)",
						of.Name, of.Offset, of.Type.Size(), cf.Offset, cf.Type.Size())
				}
			}
		})
	}
}

// flatFields lists t's fields with embedded structs (ServiceMaster) in
// their place, offsets counted from t's start: C's struct is flat.
func flatFields(t reflect.Type, base uintptr) []reflect.StructField {
	var out []reflect.StructField
	for i := range t.NumField() {
		f := t.Field(i)
		f.Offset += base
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			out = append(out, flatFields(f.Type, f.Offset)...)
			continue
		}
		out = append(out, f)
	}
	return out
}

func TestKeyConversions(t *testing.T) {
	for _, s := range []string{"10.96.0.1:80/TCP", "[fd00::1]:53/UDP/i", "0.0.0.0:30000/SCTP", "10.0.0.1:0/ANY"} {
		a := lb.MustParseL3n4Addr(s)
		k := NewServiceKey(a, 3)
		if k.L3n4Addr() != a || k.Slot != 3 {
			t.Errorf("%s: key round trip gives %s slot %d", s, k.L3n4Addr(), k.Slot)
		}
		if got := NewRevNatValue(a).AddrPort(); got != a.AddrPort() {
			t.Errorf("%s: rev-NAT round trip gives %s", s, got)
		}
		if got := NewRevNatValue(a).L3n4Addr(); got != a {
			t.Errorf("%s: rev-NAT round trip of the whole frontend gives %s", s, got)
		}
	}
	k := NewServiceKey(lb.MustParseL3n4Addr("10.0.0.1:8080/TCP"), 0)
	if k.Port != [2]byte{0x1f, 0x90} {
		t.Errorf("port bytes %x, want network order 1f90", k.Port)
	}
	if k.Addr[10] != 0xff || k.Addr[11] != 0xff || k.Addr[12] != 10 {
		t.Errorf("IPv4 not mapped into IPv6: %x", k.Addr)
	}
	for _, p := range []string{"10.0.0.0/8", "192.0.2.1/32", "0.0.0.0/0", "2001:db8::/32", "::/0"} {
		prefix := netip.MustParsePrefix(p)
		key := NewSourceRangeKey(7, prefix)
		if key.Prefix() != prefix || key.RevNatID != 7 {
			t.Errorf("%s: source range key round trip gives %s", p, key.Prefix())
		}
	}
	if got := NewSourceRangeKey(1, netip.MustParsePrefix("10.0.0.0/8")).PrefixLen; got != 32+96+8 {
		t.Errorf("IPv4 /8 prefix length %d, want %d", got, 32+96+8)
	}
}
