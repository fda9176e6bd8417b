package bpf_test

import (
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// A write of lb_services after its Maps were closed fails with an error,
// as it did before lb_services_seq: its bracket must not touch the
// word's unmapped memory (a fault there ends the process, past recover).
func TestKernelServicesWriteAfterCloseIsAnError(t *testing.T) {
	cfg := bpftest.Config(t)
	m, err := bpf.NewKernelMaps(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	k := bpf.NewServiceKey(lb.MustParseL3n4Addr("10.96.0.1:80/TCP"), 0)
	if err := m.Services.Update(k, bpf.ServiceValue{RevNatID: 1}); err == nil {
		t.Error("Update after Close succeeded, want an error")
	}
	if err := m.Services.Delete(k); err == nil {
		t.Error("Delete after Close succeeded, want an error")
	}
}

// An EndWrite with no write in flight (a writer's double End, or one
// whose write the next agent ended as a dead writer's) leaves the word
// consistent: a later write still shows in flight while it runs, and
// none once it ends. Subtracting from an in-flight count of 0 would
// borrow from nothing and leave it at 2^32-1, so that the next
// BeginWrite carried into the count of writes done and showed none in
// flight while one was: the datapath would then trust reads that write
// overlapped.
func TestSeqAnUnmatchedEndNeverHidesAWriteInFlight(t *testing.T) {
	for _, kind := range []string{"memory", "kernel"} {
		t.Run(kind, func(t *testing.T) {
			var m *bpf.Maps
			if kind == "kernel" {
				m = bpftest.KernelMaps(t, bpftest.Config(t))
			} else {
				var err error
				if m, err = bpf.NewMemoryMaps(bpf.DefaultConfig, nil); err != nil {
					t.Fatal(err)
				}
			}
			seq := m.ServicesSeq
			before := seq.Load()
			seq.EndWrite() // unmatched
			if got := seq.Load(); got&bpf.SeqInFlight != 0 {
				t.Errorf("after an unmatched EndWrite: %#x (was %#x), want none in flight", got, before)
			}
			seq.BeginWrite()
			during := seq.Load()
			if during&bpf.SeqInFlight != 1 {
				t.Errorf("a write begun after an unmatched EndWrite: %#x, want 1 in flight", during)
			}
			seq.EndWrite()
			after := seq.Load()
			if after&bpf.SeqInFlight != 0 || after>>32 <= during>>32 {
				t.Errorf("that write ended: %#x (%#x during it), want none in flight and one more done", after, during)
			}
		})
	}
}
