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

// rawGen reads the generation the kernel's lb_services holds for k.
func rawGen(t *testing.T, pinDir string, k bpf.ServiceKey) uint64 {
	t.Helper()
	m, err := ebpf.LoadPinnedMap(filepath.Join(pinDir, "lb_services"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	raw := make([]byte, m.ValueSize())
	if err := m.Lookup(&k, &raw); err != nil {
		t.Fatalf("%v: %v", k.L3n4Addr(), err)
	}
	return binary.LittleEndian.Uint64(raw[len(raw)-8:])
}

// Kernel maps stamp every master they write, one write at a time or in a
// batch, with a generation above every one before, and a slot's entry
// with none; reads leave it out, and a batch leaves the caller's values
// as they were.
func TestKernelServicesStampEveryMasterWriteWithANewGeneration(t *testing.T) {
	cfg := bpftest.Config(t)
	m := bpftest.KernelMaps(t, cfg)
	fe := lb.MustParseL3n4Addr("10.96.0.1:80/TCP")
	master, slot := bpf.NewServiceKey(fe, 0), bpf.NewServiceKey(fe, bpf.InlineSlots+1)
	v := bpf.ServiceValue{RevNatID: 7, ServiceMaster: bpf.ServiceMaster{Count: 1}}
	var last uint64
	newer := func(how string) {
		t.Helper()
		g := rawGen(t, cfg.LBPinDir, master)
		if g <= last {
			t.Errorf("%s: generation %d, not above the last one's %d", how, g, last)
		}
		last = g
	}
	if err := m.Services.Update(master, v); err != nil {
		t.Fatal(err)
	}
	newer("first write")
	if err := m.Services.Update(master, v); err != nil {
		t.Fatal(err)
	}
	newer("the same value again")
	vs := []bpf.ServiceValue{v, {BackendID: 3, RevNatID: 7}}
	if err := m.Services.BatchUpdate([]bpf.ServiceKey{master, slot}, vs); err != nil {
		t.Fatal(err)
	}
	newer("a batch")
	if vs[0].Gen != 0 || vs[1].Gen != 0 {
		t.Errorf("the batch's values were stamped: %d, %d", vs[0].Gen, vs[1].Gen)
	}
	if g := rawGen(t, cfg.LBPinDir, slot); g != 0 {
		t.Errorf("a slot's entry has generation %d, want 0", g)
	}
	got, _, err := m.Services.Lookup(master)
	if err != nil || got != v {
		t.Errorf("lookup: %+v, %v; want %+v", got, err, v)
	}
	if err := m.Services.Iterate(func(k bpf.ServiceKey, got bpf.ServiceValue) bool {
		if got.Gen != 0 {
			t.Errorf("iterate: %v slot %d with generation %d", k.L3n4Addr(), k.Slot, got.Gen)
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
}

// An agent restarted over pinned maps writes masters with generations
// above those its predecessor wrote, even if the wall clock, where the
// count starts, went back: its restore read them.
func TestRestartedKernelServicesCountOnFromThePinnedGenerations(t *testing.T) {
	cfg := pinnedConfig(t)
	fe := lb.MustParseL3n4Addr("10.96.0.1:80/TCP")
	a, b := bpf.NewServiceKey(fe, 0), bpf.NewServiceKey(lb.MustParseL3n4Addr("10.96.0.2:80/TCP"), 0)
	m, err := bpf.NewKernelMaps(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Services.Update(a, bpf.ServiceValue{RevNatID: 1}); err != nil {
		t.Fatal(err)
	}
	m.Close()
	// As a predecessor whose clock ran ahead would have left it.
	pinned, err := ebpf.LoadPinnedMap(filepath.Join(cfg.LBPinDir, "lb_services"), nil)
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, pinned.ValueSize())
	if err := pinned.Lookup(&a, &raw); err != nil {
		t.Fatal(err)
	}
	ahead := uint64(1) << 62
	binary.LittleEndian.PutUint64(raw[len(raw)-8:], ahead)
	if err := pinned.Update(&a, raw, ebpf.UpdateExist); err != nil {
		t.Fatal(err)
	}
	pinned.Close()

	m, err = bpf.NewKernelMaps(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Services.Iterate(func(bpf.ServiceKey, bpf.ServiceValue) bool { return true }); err != nil { // the restore
		t.Fatal(err)
	}
	if err := m.Services.Update(b, bpf.ServiceValue{RevNatID: 2}); err != nil {
		t.Fatal(err)
	}
	if g := rawGen(t, cfg.LBPinDir, b); g <= ahead {
		t.Errorf("generation %d after a restore that read %d", g, ahead)
	}
}
