package bpftest_test

import (
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
)

// Faults fail about their share of operations, and none once their
// probability is 0.
func TestFaultsFailTheirShareUntilSetToZero(t *testing.T) {
	faults := bpftest.NewFaults(0.5, 1)
	m, err := bpf.NewMemoryMaps(bpf.DefaultConfig, faults)
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for i := range 100 {
		if m.RevNat.Update(uint32(i%8+1), bpf.RevNatValue{}) != nil {
			failed++
		}
	}
	if failed < 30 || failed > 70 {
		t.Fatalf("%d of 100 updates failed at p=0.5", failed)
	}
	if faults.Injected() != failed {
		t.Errorf("Injected() = %d, but %d updates failed", faults.Injected(), failed)
	}
	faults.SetProbability(0)
	for i := range 100 {
		if err := m.RevNat.Update(uint32(i%8+1), bpf.RevNatValue{}); err != nil {
			t.Fatal(err)
		}
	}
}

// A nil *Faults, as a typed nil in the interface, injects nothing.
func TestNilFaultsInjectNothing(t *testing.T) {
	var faults *bpftest.Faults
	m, err := bpf.NewMemoryMaps(bpf.DefaultConfig, faults)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.RevNat.Update(1, bpf.RevNatValue{}); err != nil {
		t.Fatal(err)
	}
}
