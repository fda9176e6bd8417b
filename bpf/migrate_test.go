package bpf_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// pinOldServices pins, in cfg's pin directory, lb_services as a version
// before inline slots made it (24-byte values, one entry per slot), with
// a frontend of each given slot count: frontend i is 10.96.50.i:80/TCP,
// ID i+1, and its slot s names backend 100*(i+1)+s.
func pinOldServices(t *testing.T, cfg bpf.Config, slotCounts []int) {
	t.Helper()
	m := pinServicesOfSize(t, cfg, 24)
	defer m.Close()
	for i, n := range slotCounts {
		fe := oldFrontend(i)
		for s := 1; s <= n; s++ {
			var v [24]byte
			binary.LittleEndian.PutUint32(v[0:], uint32(100*(i+1)+s))
			binary.LittleEndian.PutUint32(v[4:], uint32(i+1))
			if err := m.Put(bpf.NewServiceKey(fe, uint16(s)), v); err != nil {
				t.Fatal(err)
			}
		}
		var v [24]byte
		binary.LittleEndian.PutUint32(v[4:], uint32(i+1))
		binary.LittleEndian.PutUint16(v[12:], uint16(n)) // count
		v[16], v[18] = uint8(lb.SVCTypeClusterIP), bpf.AlgorithmRandom
		if err := m.Put(bpf.NewServiceKey(fe, 0), v); err != nil {
			t.Fatal(err)
		}
	}
}

// pinServicesOfSize pins, in cfg's pin directory, an empty lb_services
// with values of size bytes, as an older version made it.
func pinServicesOfSize(t *testing.T, cfg bpf.Config, size uint32) *ebpf.Map {
	t.Helper()
	if err := os.MkdirAll(cfg.LBPinDir, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := ebpf.NewMapWithOptions(&ebpf.MapSpec{Name: "lb_services", Type: ebpf.Hash, KeySize: 24, ValueSize: size,
		MaxEntries: cfg.LBServicesMax, Flags: unix.BPF_F_NO_PREALLOC, Pinning: ebpf.PinByName}, ebpf.MapOptions{PinPath: cfg.LBPinDir})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func oldFrontend(i int) lb.L3n4Addr {
	return lb.MustParseL3n4Addr(fmt.Sprintf("10.96.50.%d:80/TCP", i))
}

// An agent upgraded from a version before inline slots migrates the
// pinned lb_services instead of refusing it: every frontend keeps its ID
// and the backend of every slot, the slots 1..InlineSlots move into the
// master, only later slots keep entries, and the pin names the new map
// (nothing left beside it).
func TestUpgradeMigratesPinnedServicesToInlineSlotsKeepingIDs(t *testing.T) {
	cfg := pinnedConfig(t)
	cfg.LBServicesMax = 1024
	counts := []int{0, 1, bpf.InlineSlots, bpf.InlineSlots + 1, 2*bpf.InlineSlots + 3}
	pinOldServices(t, cfg, counts)
	read := 0
	for _, n := range counts {
		read += 1 + n
	}

	m, err := bpf.NewKernelMaps(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if want := []bpf.MigratedMap{{Name: "lb_services", Entries: read}}; !slices.Equal(m.Migrated, want) {
		t.Errorf("migrated %v, want %v", m.Migrated, want)
	}
	entries := 0
	if err := m.Services.Iterate(func(bpf.ServiceKey, bpf.ServiceValue) bool { entries++; return true }); err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, n := range counts {
		want += 1 + bpf.SlotEntries(n)
	}
	if entries != want {
		t.Errorf("%d lb_services entries after the migration, want %d", entries, want)
	}
	for i, n := range counts {
		fe := oldFrontend(i)
		master, ok, err := m.Services.Lookup(bpf.NewServiceKey(fe, 0))
		if err != nil || !ok {
			t.Fatalf("%s: no master after the migration (%v)", fe, err)
		}
		if master.RevNatID != uint32(i+1) || int(master.Count) != n || master.Type != uint8(lb.SVCTypeClusterIP) {
			t.Errorf("%s: master %+v, want ID %d and count %d", fe, master, i+1, n)
		}
		for s := 1; s <= n; s++ {
			if id, ok, err := bpf.SlotBackend(m.Services, fe, master, s); err != nil || !ok || id != uint32(100*(i+1)+s) {
				t.Errorf("%s slot %d: backend %d (%v, %v), want %d", fe, s, id, ok, err, 100*(i+1)+s)
			}
		}
	}
	m.Close()

	// The pin now names a map of this version's layout: the next start
	// opens it as it is, migrating nothing.
	m2, err := bpf.NewKernelMaps(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if len(m2.Migrated) != 0 || len(m2.Recreated) != 0 {
		t.Errorf("the second start migrated %v, recreated %v", m2.Migrated, m2.Recreated)
	}
	left, err := os.ReadDir(cfg.LBPinDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		if strings.HasSuffix(e.Name(), "_migrating") {
			t.Errorf("the migration left %s behind", e.Name())
		}
	}
}

// The reference datapath balances over a migrated map as over one the
// reconciler wrote: new flows to a frontend whose slots came from the old
// layout reach each of its backends, inline or not.
func TestDatapathBalancesOverAMigratedServicesMap(t *testing.T) {
	cfg := dpConfig()
	cfg.LBPinDir = bpftest.Config(t).LBPinDir
	n := bpf.InlineSlots + 2
	pinOldServices(t, cfg, []int{n})
	h := newDatapath(t, cfg)
	fe := oldFrontend(0)
	h.check(h.maps.RevNat.Update(1, bpf.NewRevNatValue(fe)))
	for s := 1; s <= n; s++ {
		h.backend(uint32(100+s), fmt.Sprintf("10.1.1.%d:8080/TCP", s), lb.BackendActive)
	}
	got := map[uint32]int{}
	for port := 0; port < 60*n; port++ {
		f := flow(fmt.Sprintf("10.0.%d.%d:%d", port>>8, port&0xff, 30000+port), "10.96.50.0:80", lb.ProtoTCP)
		got[h.backendAt(h.balance(f).Dst)]++
	}
	for s := 1; s <= n; s++ {
		if got[uint32(100+s)] == 0 {
			t.Errorf("no new flow reached the backend of slot %d: %v", s, got)
		}
	}
}

// A migration with lb_services' size given (not the default) makes the
// new map at that size, as the next start opens it: a migrated map kept
// at the old map's size once started the agent, and the next start with
// the same flags refused the pin (it no longer matched the layout).
func TestMigrationWithAGivenServicesSizeIsOpenedByTheNextStart(t *testing.T) {
	cfg := pinnedConfig(t)
	cfg.LBServicesMax = 2048
	pinOldServices(t, cfg, []int{1, bpf.InlineSlots + 2})
	cfg.LBServicesMax = 1024 // given smaller: the new layout needs fewer entries

	m, err := bpf.NewKernelMaps(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := m.Capacity("lb_services"); c.MaxEntries != int(cfg.LBServicesMax) {
		got := c.MaxEntries
		t.Errorf("the migrated lb_services holds %d entries, want the given %d", got, cfg.LBServicesMax)
	}
	m.Close()
	m2, err := bpf.NewKernelMaps(cfg)
	if err != nil {
		t.Fatalf("the start after the migration, with the same flags: %v", err)
	}
	defer m2.Close()
	if _, ok, err := m2.Services.Lookup(bpf.NewServiceKey(oldFrontend(1), bpf.InlineSlots+2)); err != nil || !ok {
		t.Errorf("slot %d of %s lost across the two starts (%v)", bpf.InlineSlots+2, oldFrontend(1), err)
	}
}

// A given lb_services size too small for the old map's entries in the
// new layout is refused with an error naming the map, how many entries
// it needs and the flag, and the old pin is left as it was; with
// --lb-recreate-maps the map is recreated empty, as any map that does not
// fit.
func TestMigrationRefusesAGivenServicesSizeTooSmallForItsEntries(t *testing.T) {
	cfg := pinnedConfig(t)
	cfg.LBServicesMax = 2048
	pinOldServices(t, cfg, []int{bpf.InlineSlots + 40, 1, 1})
	cfg.LBServicesMax = 8 // 1+40, 1, 1 entries in the new layout

	m, err := bpf.NewKernelMaps(cfg)
	if err == nil {
		m.Close()
		t.Fatal("started with lb_services of 8 entries for 43")
	}
	for _, want := range []string{"lb_services", "43", "--lb-services-max"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	old, err := ebpf.LoadPinnedMap(cfg.LBPinDir+"/lb_services", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if old.ValueSize() != 24 {
		t.Errorf("the pin names a map of %d-byte values, want the old map (24) untouched", old.ValueSize())
	}

	// Told to recreate maps that do not fit, it does.
	cfg.LBRecreateMaps = true
	m, err = bpf.NewKernelMaps(cfg)
	if err != nil {
		t.Fatalf("with --lb-recreate-maps: %v", err)
	}
	defer m.Close()
	if len(m.Recreated) != 1 || m.Recreated[0].Name != "lb_services" {
		t.Errorf("with --lb-recreate-maps, recreated %v, want lb_services", m.Recreated)
	}
}

// lbctl (OpenPinnedMaps) beside an agent of a version before inline
// slots says so, naming lb_services, rather than failing at its first
// read with "buffer too small"; the agent's own start migrates the map.
func TestOpenPinnedMapsSaysServicesIsOfTheLayoutBeforeInlineSlots(t *testing.T) {
	cfg := pinnedConfig(t)
	err := openPinnedBesideOlderServices(t, cfg, func() { pinOldServices(t, cfg, []int{1, 3}) })
	for _, want := range []string{"lb_services", "before inline slots", "older version"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// openPinnedBesideOlderServices pins this version's maps in cfg's pin
// directory but lb_services, which pin pins as an older version made it,
// and returns OpenPinnedMaps' error, failing the test if there is none.
func openPinnedBesideOlderServices(t *testing.T, cfg bpf.Config, pin func()) error {
	t.Helper()
	m, err := bpf.NewKernelMaps(cfg) // the other maps, as that agent pinned them
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if err := os.Remove(cfg.LBPinDir + "/lb_services"); err != nil {
		t.Fatal(err)
	}
	pin()
	pinned, err := bpf.OpenPinnedMaps(cfg.LBPinDir)
	if err == nil {
		_, derr := bpf.TakeDump(pinned)
		pinned.Close()
		t.Fatalf("opened lb_services of an older layout without an error (a dump then: %v)", derr)
	}
	return err
}
