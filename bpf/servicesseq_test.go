package bpf_test

import (
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// rawSeq reads lb_services_seq's word as the datapath does, through the
// pinned map rather than the mapping the writers add to.
func rawSeq(t *testing.T, pinDir string) uint64 {
	t.Helper()
	m, err := ebpf.LoadPinnedMap(filepath.Join(pinDir, "lb_services_seq"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var raw [8]byte
	if err := m.Lookup(uint32(0), &raw); err != nil {
		t.Fatal(err)
	}
	return binary.LittleEndian.Uint64(raw[:])
}

// Every write of the kernel's lb_services, one at a time or in a batch,
// that succeeds or fails, is announced in lb_services_seq and ended:
// one write more done, none left in flight.
func TestKernelServicesAnnounceEveryWrite(t *testing.T) {
	cfg := bpftest.Config(t)
	m := bpftest.KernelMaps(t, cfg)
	k := bpf.NewServiceKey(lb.MustParseL3n4Addr("10.96.0.1:80/TCP"), 0)
	v := bpf.ServiceValue{RevNatID: 7, ServiceMaster: bpf.ServiceMaster{Count: 1}}
	for _, w := range []struct {
		what  string
		write func() error
	}{
		{"update", func() error { return m.Services.Update(k, v) }},
		{"create of a key it holds (fails)", func() error {
			return m.Services.(interface {
				Create(bpf.ServiceKey, bpf.ServiceValue) error
			}).Create(k, v)
		}},
		{"batch update", func() error { return m.Services.BatchUpdate([]bpf.ServiceKey{k}, []bpf.ServiceValue{v}) }},
		{"batch update of 1 key and 2 values (fails)", func() error { return m.Services.BatchUpdate([]bpf.ServiceKey{k}, []bpf.ServiceValue{v, v}) }},
		{"lookup and delete", func() error { _, _, err := bpf.LookupAndDelete(m.Services, k); return err }},
		{"update", func() error { return m.Services.Update(k, v) }},
		{"delete", func() error { return m.Services.Delete(k) }},
		{"batch delete", func() error { return m.Services.BatchDelete([]bpf.ServiceKey{k}) }},
	} {
		before := rawSeq(t, cfg.LBPinDir)
		_ = w.write()
		after := rawSeq(t, cfg.LBPinDir)
		if after != before+bpf.SeqDone || after&bpf.SeqInFlight != 0 || m.ServicesSeq.Load() != after {
			t.Errorf("%s: lb_services_seq %#x -> %#x (%#x through the mapping), want one write more done and none in flight",
				w.what, before, after, m.ServicesSeq.Load())
		}
	}
}

// A write announced and never ended (its writer died) would keep every
// read guarded: the next agent, which holds the pin directory alone,
// ends it, and says so.
func TestNewKernelMapsEndsTheWritesADeadWriterLeftInFlight(t *testing.T) {
	bpftest.Require(t)
	cfg := bpftest.Config(t)
	first, err := bpf.NewKernelMaps(cfg)
	if err != nil {
		t.Fatal(err)
	}
	first.ServicesSeq.BeginWrite()
	first.ServicesSeq.BeginWrite()
	left := first.ServicesSeq.Load()
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	next := bpftest.KernelMaps(t, cfg)
	if next.WritesLeftInFlight != 2 {
		t.Errorf("WritesLeftInFlight %d, want the 2 left", next.WritesLeftInFlight)
	}
	if got := rawSeq(t, cfg.LBPinDir); got&bpf.SeqInFlight != 0 || got>>32 <= left>>32 {
		t.Errorf("lb_services_seq %#x after the restart (left at %#x), want none in flight and the count of writes done moved on", got, left)
	}
}
