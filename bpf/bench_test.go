package bpf_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

var sinkKey bpf.ServiceKey

// BenchmarkNewServiceKey measures encoding a frontend address and slot as
// an lb_services key (IPv4 and IPv6).
func BenchmarkNewServiceKey(b *testing.B) {
	for _, addr := range []string{"10.96.0.1:80/TCP", "[fd00::1]:443/TCP"} {
		a := lb.MustParseL3n4Addr(addr)
		b.Run(addr, func(b *testing.B) {
			b.ReportAllocs()
			for i := range b.N {
				sinkKey = bpf.NewServiceKey(a, uint16(i))
			}
		})
	}
}

var sinkBackend bpf.Backend

// BenchmarkNewBackend measures encoding a selected backend as its
// lb_backends value.
func BenchmarkNewBackend(b *testing.B) {
	ref := lb.BackendRef{Address: lb.MustParseL3n4Addr("10.0.0.1:8080/TCP"), Weight: 100, Zone: lb.ZoneOf("a")}
	b.ReportAllocs()
	for range b.N {
		sinkBackend = bpf.NewBackend(ref, 1)
	}
}

// BenchmarkServicesUpdate measures writing n lb_services entries into
// kernel maps one syscall each and in one batch (ns/op is per entry).
func BenchmarkServicesUpdate(b *testing.B) {
	const n = 1000
	keys := make([]bpf.ServiceKey, n)
	vals := make([]bpf.ServiceValue, n)
	for i := range keys {
		keys[i] = bpf.NewServiceKey(lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), 80, lb.ScopeExternal), 0)
		vals[i] = bpf.ServiceValue{RevNatID: uint32(i + 1), ServiceMaster: bpf.ServiceMaster{Count: 1}}
	}
	for _, batch := range []bool{false, true} {
		b.Run(fmt.Sprintf("batch=%v", batch), func(b *testing.B) {
			m := bpftest.KernelMaps(b, bpftest.Config(b))
			b.ResetTimer()
			for i := 0; i < b.N; i += n {
				if batch {
					if err := m.Services.BatchUpdate(keys, vals); err != nil {
						b.Fatal(err)
					}
					continue
				}
				for j := range keys {
					if err := m.Services.Update(keys[j], vals[j]); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkIterate measures reading every entry of a kernel lb_services
// holding 50,000 (ns/op is per entry).
func BenchmarkIterate(b *testing.B) {
	const n = 50000
	cfg := bpftest.Config(b)
	cfg.LBServicesMax = 1 << 16
	m := bpftest.KernelMaps(b, cfg)
	keys := make([]bpf.ServiceKey, n)
	vals := make([]bpf.ServiceValue, n)
	for i := range keys {
		keys[i] = bpf.NewServiceKey(lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), 80, lb.ScopeExternal), 0)
	}
	if err := m.Services.BatchUpdate(keys, vals); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i += n {
		seen := 0
		if err := m.Services.Iterate(func(bpf.ServiceKey, bpf.ServiceValue) bool { seen++; return true }); err != nil || seen != n {
			b.Fatalf("saw %d, %v", seen, err)
		}
	}
}
