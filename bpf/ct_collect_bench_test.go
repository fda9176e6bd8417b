package bpf_test

import (
	"encoding/binary"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
)

// BenchmarkCollectConntrack measures one collection of a kernel lb_ct
// holding 100,000 expired one-entry flows (a burst of short flows gone
// quiet), which it deletes all: ns/op is per collection, ns/entry per
// expired entry.
func BenchmarkCollectConntrack(b *testing.B) {
	const n = 100000
	cfg := bpftest.Config(b)
	cfg.LBCTMax = 1 << 18 // room, so that the LRU takes none of them
	m := bpftest.KernelMaps(b, cfg)
	keys := make([]bpf.CTKey, n)
	vals := make([]bpf.CTValue, n)
	for i := range keys {
		k := bpf.CTKey{Proto: 17, Kind: bpf.CTClient}
		k.Src[10], k.Src[11] = 0xff, 0xff
		binary.BigEndian.PutUint32(k.Src[12:], 0x0a000000+uint32(i/1000))
		binary.BigEndian.PutUint16(k.SPort[:], uint16(20000+i%1000))
		keys[i] = k
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		expires := bpf.MonotonicSeconds() - 10
		for i := range vals {
			vals[i] = bpf.CTValue{BackendID: 1, RevNatID: 1, Dir: bpf.CTFlow, Expires: expires}
		}
		if err := m.Conntrack.BatchUpdate(keys, vals); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		c, err := bpf.CollectConntrack(m, m.Conntrack)
		if err != nil {
			b.Fatal(err)
		}
		if c.Expired != n {
			b.Fatalf("the collector deleted %d entries of %d, want all %d", c.Expired, c.Entries, n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
}
