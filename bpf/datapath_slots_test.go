package bpf_test

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// TestDatapathReadsNoTornSlots reads one ID of lb_backends and of lb_rev_nat
// in the kernel (c/probe.h, thousands of reads per run) while Go reuses its
// slot as fast as it can: the ID is written, deleted, its slot given to
// the ID one table size up, deleted, and again. Every field of a value is
// written as a function of its ID, so a copy mixing two values, or a value
// and the zeros of a delete, is seen. The datapath must never act on one.
func TestDatapathReadsNoTornSlots(t *testing.T) {
	for _, tc := range []struct {
		name  string
		map_  uint32
		write func(m *bpf.Maps, id uint32) error
		del   func(m *bpf.Maps, id uint32) error
	}{
		{"lb_backends", 0,
			func(m *bpf.Maps, id uint32) error {
				return m.Backends.Update(id, bpf.Backend{Addr: probeAddr(id), Port: probePort(id),
					Proto: uint8(lb.ProtoTCP), State: uint8(lb.BackendActive), ClusterID: id})
			},
			func(m *bpf.Maps, id uint32) error { return m.Backends.Delete(id) }},
		{"lb_rev_nat", 1,
			func(m *bpf.Maps, id uint32) error {
				return m.RevNat.Update(id, bpf.RevNatValue{Addr: probeAddr(id), Port: probePort(id)})
			},
			func(m *bpf.Maps, id uint32) error { return m.RevNat.Delete(id) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := bpf.DefaultConfig
			cfg.LBBackendsMax, cfg.LBRevNatMax = 64, 64
			h := newDatapath(t, cfg)
			d, err := bpf.LoadProbeDatapath(h.maps)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			const a, b = 5, 5 + 64 // one slot
			// The datapath learns an ID only once its entry is written
			// (write order), so a's first write, which fills a
			// never-used slot in one write, comes before the probe.
			if err := tc.write(h.maps, a); err != nil {
				t.Fatal(err)
			}
			var stop atomic.Bool
			var wg sync.WaitGroup
			var writes int
			var werr error
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					for _, id := range []uint32{a, b} {
						if werr = tc.write(h.maps, id); werr != nil {
							return
						}
						if werr = tc.del(h.maps, id); werr != nil {
							return
						}
						writes += 2
					}
				}
			}()
			pkt := make([]byte, 14+8)
			binary.LittleEndian.PutUint32(pkt[14:], a)
			binary.LittleEndian.PutUint32(pkt[18:], tc.map_)
			var hits, torn uint32
			deadline := time.Now().Add(2 * time.Second)
			for time.Now().Before(deadline) && torn == 0 {
				ret, err := d.Program("lb_probe_slots").Run(&ebpf.RunOptions{Data: pkt})
				if err != nil {
					t.Fatal(err)
				}
				hits += ret >> 16
				torn += ret & 0xffff
			}
			stop.Store(true)
			wg.Wait()
			if werr != nil {
				t.Fatal(werr)
			}
			t.Logf("%d slot writes, %d reads of ID %d found it, %d torn", writes, hits, a, torn)
			if torn != 0 {
				t.Fatalf("%d of %d reads of ID %d copied a value that mixes two writes of its slot", torn, hits, a)
			}
			if hits < 1000 {
				t.Fatalf("only %d reads found ID %d while its slot was reused: the probe proves nothing", hits, a)
			}
		})
	}
}

func probeAddr(id uint32) (a [16]byte) {
	for i := 0; i < 16; i += 4 {
		binary.LittleEndian.PutUint32(a[i:], id)
	}
	return a
}

func probePort(id uint32) [2]byte { return [2]byte{byte(id), byte(id >> 8)} }
