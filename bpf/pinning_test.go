package bpf_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
	"golang.org/x/sys/unix"
)

// pinnedConfig returns smallConfig pinned in a fresh bpffs directory.
func pinnedConfig(t *testing.T) bpf.Config {
	cfg := smallConfig()
	cfg.LBPinDir = bpftest.Config(t).LBPinDir
	return cfg
}

// pinBackendAndTable opens the maps of cfg, writes backend 1 (cluster 42)
// and a Maglev table for frontend 1, and closes them again.
func pinBackendAndTable(t *testing.T, cfg bpf.Config) {
	t.Helper()
	m, err := bpf.NewKernelMaps(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Backends.Update(1, bpf.Backend{ClusterID: 42}); err != nil {
		t.Fatal(err)
	}
	if err := m.Maglev.Update(1, make([]uint32, cfg.LBMaglevTableSize)); err != nil {
		t.Fatal(err)
	}
}

// A restarted agent finds the entries it pinned.
func TestPinnedEntriesSurviveReopening(t *testing.T) {
	cfg := pinnedConfig(t)
	pinBackendAndTable(t, cfg)
	for _, name := range []string{"lb_services", "lb_backends", "lb_maglev"} {
		if _, err := os.Stat(filepath.Join(cfg.LBPinDir, name)); err != nil {
			t.Fatalf("%s not pinned: %v", name, err)
		}
	}
	m := bpftest.KernelMaps(t, cfg)
	if v, ok, _ := m.Backends.Lookup(1); !ok || v.ClusterID != 42 {
		t.Fatalf("backend 1 after reopening: %+v %v", v, ok)
	}
	if _, ok, _ := m.Maglev.Lookup(1); !ok {
		t.Fatal("Maglev table 1 lost on reopening")
	}
}

// A pinned map of another layout is an error that says what to do; with
// --lb-recreate-maps that map (only) is recreated empty.
func TestLayoutChangeFailsUntilRecreateIsAllowed(t *testing.T) {
	cfg := pinnedConfig(t)
	pinBackendAndTable(t, cfg)
	changed := cfg
	changed.LBMaglevTableSize = 509
	if _, err := bpf.NewKernelMaps(changed); err == nil || !strings.Contains(err.Error(), "--lb-recreate-maps") {
		t.Fatalf("changed Maglev size: %v, want an error pointing at --lb-recreate-maps", err)
	}
	changed.LBRecreateMaps = true
	m := bpftest.KernelMaps(t, changed)
	if _, ok, _ := m.Maglev.Lookup(1); ok {
		t.Fatal("recreated lb_maglev kept an old table")
	}
	if v, ok, _ := m.Backends.Lookup(1); !ok || v.ClusterID != 42 {
		t.Fatal("recreating lb_maglev lost lb_backends' entries")
	}
}

// Changing --lb-maglev-table-size while the pinned lb_maglev holds no
// table still yields maps that take tables of the new size (or an error
// pointing at --lb-recreate-maps). Once, the empty pinned map was
// accepted with its inner template of the old size, so that every Maglev
// update failed and --lb-recreate-maps did not help.
func TestMaglevTableSizeChangeIsCaughtWithEmptyPinnedMap(t *testing.T) {
	cfg := pinnedConfig(t)
	m, err := bpf.NewKernelMaps(cfg) // 251, no table written
	if err != nil {
		t.Fatal(err)
	}
	m.Close()

	changed := cfg
	changed.LBMaglevTableSize = 509
	m2, err := bpf.NewKernelMaps(changed)
	if err != nil {
		if !strings.Contains(err.Error(), "--lb-recreate-maps") {
			t.Fatalf("reopen with another table size: %v", err)
		}
		return
	}
	defer m2.Close()
	if err := m2.Maglev.Update(1, make([]uint32, 509)); err != nil {
		t.Fatalf("the maps opened with table size 509, but a 509-slot table cannot be written: %v", err)
	}
}

// --lb-maps auto falls back to in-memory maps only when the process cannot
// create kernel maps: pinned maps of another layout are an error that
// says so. Once, auto mode fell back on them too, and the agent programmed
// no datapath with only an Info line to tell.
func TestAutoModeReportsIncompatiblePinnedMaps(t *testing.T) {
	cfg := pinnedConfig(t)
	m, err := bpf.NewKernelMaps(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()

	changed := cfg
	changed.LBServicesMax = cfg.LBServicesMax * 2 // another layout
	var got *bpf.Maps
	h := hive.New(
		bpf.Cell,
		cell.Invoke(func(m *bpf.Maps) { got = m }),
	)
	hive.AddConfigOverride(h, func(c *bpf.Config) { *c = changed })
	log := hivetest.Logger(t)
	if err := h.Populate(log); err != nil {
		if !strings.Contains(err.Error(), "--lb-recreate-maps") {
			t.Fatalf("populate: %v", err)
		}
		return // the error that says so
	}
	defer h.Stop(log, context.Background())
	if got.Kind != "kernel" {
		t.Fatalf("pinned maps of another layout silently gave %s maps instead of an error", got.Kind)
	}
}

// With --lb-recreate-maps, only the pinned map whose layout changed is
// recreated, and the log says which and why; the others keep their
// entries. (lb_services was once recreated without a word.)
func TestRecreateReplacesOnlyTheChangedMapAndSaysWhy(t *testing.T) {
	cfg := pinnedConfig(t)
	pinBackendAndTable(t, cfg)
	bpftest.PinIncompatibleMap(t, cfg.LBPinDir, "lb_services")
	cfg.LBRecreateMaps = true
	m, logs := startCell(t, cfg, "kernel")
	var warned []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, "Recreated") {
			warned = append(warned, l)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "map=lb_services") || !strings.Contains(warned[0], "ValueSize") {
		t.Fatalf("want one WARN line saying lb_services was recreated and why (its value size); log:\n%s", logs)
	}
	if v, ok, _ := m.Backends.Lookup(1); !ok || v.ClusterID != 42 {
		t.Error("lb_backends lost its entry, though its layout did not change")
	}
	if _, ok, _ := m.Maglev.Lookup(1); !ok {
		t.Error("lb_maglev lost its table, though its layout did not change")
	}
	if err := m.Services.Update(bpf.ServiceKey{}, bpf.ServiceValue{}); err != nil {
		t.Errorf("the recreated lb_services takes no entry: %v", err)
	}
}

// lb_backends and lb_rev_nat became dense ID maps (arrays whose slot is
// ID % max_entries). A pinned one of the old kind (a hash map) or of
// another --lb-backends-max would put IDs in other slots: it is an error
// that points at --lb-recreate-maps, which recreates it empty.
func TestDenseIDMapOfOldKindOrSizeIsRecreated(t *testing.T) {
	cfg := pinnedConfig(t)
	if err := os.MkdirAll(cfg.LBPinDir, 0o755); err != nil {
		t.Fatal(err)
	}
	old, err := ebpf.NewMapWithOptions(&ebpf.MapSpec{
		Name: "lb_backends", Type: ebpf.Hash, KeySize: 4, ValueSize: 28,
		MaxEntries: cfg.LBBackendsMax, Flags: unix.BPF_F_NO_PREALLOC, Pinning: ebpf.PinByName,
	}, ebpf.MapOptions{PinPath: cfg.LBPinDir})
	if err != nil {
		t.Fatal(err)
	}
	old.Close()
	if _, err := bpf.NewKernelMaps(cfg); err == nil || !strings.Contains(err.Error(), "lb_backends") || !strings.Contains(err.Error(), "--lb-recreate-maps") {
		t.Fatalf("pinned hash lb_backends: %v, want an error naming it and --lb-recreate-maps", err)
	}
	recreate := cfg
	recreate.LBRecreateMaps = true
	m, err := bpf.NewKernelMaps(recreate)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Recreated) != 1 || m.Recreated[0].Name != "lb_backends" {
		m.Close()
		t.Fatalf("recreated %v, want lb_backends alone", m.Recreated)
	}
	if err := m.Backends.Update(1, bpf.Backend{ClusterID: 42}); err != nil {
		m.Close()
		t.Fatal(err)
	}
	m.Close() // the next agent starts after this one stopped

	resized := recreate
	resized.LBBackendsMax *= 2
	resized.LBRecreateMaps = false
	if _, err := bpf.NewKernelMaps(resized); err == nil || !strings.Contains(err.Error(), "--lb-recreate-maps") {
		t.Fatalf("lb_backends of another max_entries: %v, want an error pointing at --lb-recreate-maps", err)
	}
}

// The flow hash seed is made once, random, with the maps, and kept with
// them: maps opened again on the same pins have the same seed, maps of
// another pin directory another one.
func TestFlowSeedIsRandomAndOutlivesARestart(t *testing.T) {
	cfg := pinnedConfig(t)
	seed := func(cfg bpf.Config) bpf.FlowSeed {
		t.Helper()
		m, err := bpf.NewKernelMaps(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		s, err := m.Seed()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	first := seed(cfg)
	if first.IsZero() {
		t.Fatal("new kernel maps have the zero (unkeyed) seed")
	}
	if again := seed(cfg); again != first {
		t.Errorf("after a restart the seed is %s, was %s", again, first)
	}
	if other := seed(pinnedConfig(t)); other == first {
		t.Errorf("two sets of maps have one seed %s", first)
	}
}

// An agent upgraded to larger default sizes finds maps pinned at an older
// version's defaults: it opens them at their size, with their entries
// (and so the IDs live flows use), and says so, rather than refusing to
// start. A size given on purpose must still match the pinned one.
func TestMapsPinnedAtAnOlderDefaultSizeAreKeptAtTheirSize(t *testing.T) {
	old := bpftest.Config(t)
	old.LBServicesMax, old.LBBackendsMax, old.LBRevNatMax = 65536, 65536, 65536 // the defaults until issue 30
	m, err := bpf.NewKernelMaps(old)
	if err != nil {
		t.Fatal(err)
	}
	key := bpf.NewServiceKey(lb.MustParseL3n4Addr("10.96.0.1:80/TCP"), 0)
	if err := m.Services.Update(key, bpf.ServiceValue{RevNatID: 70000}); err != nil {
		t.Fatal(err)
	}
	if err := m.Backends.Update(70000, bpf.Backend{ClusterID: 42}); err != nil { // slot 70000 % 65536
		t.Fatal(err)
	}
	m.Close()

	cfg := bpf.DefaultConfig
	cfg.LBPinDir = old.LBPinDir
	m, logs := startCell(t, cfg, "kernel")
	for _, name := range []string{"lb_services", "lb_backends", "lb_rev_nat"} {
		if c, _ := m.Capacity(name); c.MaxEntries != 65536 {
			t.Errorf("%s opened at %d entries, want its pinned 65536", name, c.MaxEntries)
		}
		if !strings.Contains(logs, "Kept a pinned map at its size") || !strings.Contains(logs, "map="+name) {
			t.Errorf("no log line says %s was kept at its size:\n%s", name, logs)
		}
	}
	if v, ok, _ := m.Services.Lookup(key); !ok || v.RevNatID != 70000 {
		t.Errorf("lb_services lost its entry: %+v %v", v, ok)
	}
	if v, ok, _ := m.Backends.Lookup(70000); !ok || v.ClusterID != 42 {
		t.Errorf("lb_backends lost backend 70000, or reads it from another slot: %+v %v", v, ok)
	}

	old.LBPinDir = bpftest.Config(t).LBPinDir // another agent's, as the first one holds its directory
	m, err = bpf.NewKernelMaps(old)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	given := cfg
	given.LBPinDir, given.LBServicesMax = old.LBPinDir, 1<<20 // not the default: given on purpose
	if _, err := bpf.NewKernelMaps(given); err == nil || !strings.Contains(err.Error(), "--lb-recreate-maps") {
		t.Fatalf("lb_services pinned at 65536 opened with --lb-services-max %d: %v, want an error pointing at --lb-recreate-maps", given.LBServicesMax, err)
	}
}
