package lb

import "testing"

var sinkBytes []byte

// BenchmarkL3n4AddrKey measures encoding an address as its table index
// key, allocating (Key) and into a reused buffer (AppendKey).
func BenchmarkL3n4AddrKey(b *testing.B) {
	a := MustParseL3n4Addr("[fd00::1]:443/TCP")
	b.Run("Key", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			sinkBytes = a.Key()
		}
	})
	b.Run("AppendKey", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, L3n4AddrKeyLen)
		for range b.N {
			sinkBytes = a.AppendKey(buf[:0])
		}
	})
}

// BenchmarkNewServiceName measures making a name from its parts.
func BenchmarkNewServiceName(b *testing.B) {
	b.ReportAllocs()
	var n ServiceName
	for range b.N {
		n = NewServiceName("default", "web")
	}
	sinkBytes = []byte(n.text[:0])
}

// BenchmarkSourceNameAndValidity measures what every Writer call and
// every converted object asks of a source: whether it is registered,
// and its name.
func BenchmarkSourceNameAndValidity(b *testing.B) {
	n := 0
	for b.Loop() {
		if SourceK8s.Valid() {
			n += len(SourceK8s.String())
		}
	}
	if n == 0 {
		b.Fatal("k8s is not a valid source")
	}
}

// BenchmarkServiceParamsValidate measures validating a declaration with
// one frontend, which its source and the Writer each do.
func BenchmarkServiceParamsValidate(b *testing.B) {
	p := ServiceParams{
		Name:      NewServiceName("bench", "svc-1"),
		Source:    SourceK8s,
		Frontends: []FrontendParams{{Address: MustParseL3n4Addr("10.96.0.1:80/TCP"), Type: SVCTypeClusterIP}},
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}
