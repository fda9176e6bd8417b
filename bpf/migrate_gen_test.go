package bpf_test

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// pinInlineServices pins, in cfg's pin directory, lb_services as the
// version before master generations made it (88-byte values: inline
// slots, no gen) with the entries given.
func pinInlineServices(t *testing.T, cfg bpf.Config, ks []bpf.ServiceKey, vs []bpf.ServiceValue) {
	t.Helper()
	m := pinServicesOfSize(t, cfg, 88)
	defer m.Close()
	for i := range ks {
		raw, err := binary.Append(nil, binary.LittleEndian, vs[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Put(ks[i], raw[:88]); err != nil {
			t.Fatal(err)
		}
	}
}

// An agent upgraded from the version before master generations (88-byte
// values) migrates the pinned lb_services: every entry stays as it was,
// and every master gets a generation, which the datapath's reads need.
func TestUpgradeMigratesPinnedServicesToMasterGenerations(t *testing.T) {
	cfg := pinnedConfig(t)
	fe := lb.MustParseL3n4Addr("10.96.0.1:80/TCP")
	master := bpf.ServiceValue{RevNatID: 1, ServiceMaster: bpf.ServiceMaster{Count: bpf.InlineSlots + 1,
		Type: uint8(lb.SVCTypeClusterIP), Algorithm: bpf.AlgorithmRandom, AffinityTimeout: 30}}
	var ids []uint32
	for i := range uint32(bpf.InlineSlots) {
		ids = append(ids, 100+i)
	}
	master.SetInline(ids)
	ks := []bpf.ServiceKey{bpf.NewServiceKey(fe, 0), bpf.NewServiceKey(fe, bpf.InlineSlots+1)}
	vs := []bpf.ServiceValue{master, {BackendID: 117, RevNatID: 1}}
	pinInlineServices(t, cfg, ks, vs)

	m, err := bpf.NewKernelMaps(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if want := []bpf.MigratedMap{{Name: "lb_services", Entries: 2}}; !slices.Equal(m.Migrated, want) {
		t.Errorf("migrated %v, want %v", m.Migrated, want)
	}
	for i, k := range ks {
		got, ok, err := m.Services.Lookup(k)
		if err != nil || !ok || got != vs[i] {
			t.Errorf("slot %d: %+v (%v, %v), want %+v", k.Slot, got, ok, err, vs[i])
		}
	}
	if g := rawGen(t, cfg.LBPinDir, ks[0]); g == 0 {
		t.Error("the migrated master has no generation")
	}
	if g := rawGen(t, cfg.LBPinDir, ks[1]); g != 0 {
		t.Errorf("the migrated slot's entry has generation %d, want 0", g)
	}
}

// lbctl (OpenPinnedMaps) beside an agent of the version before master
// generations says so, naming lb_services, rather than failing at its
// first read; the agent's own start migrates the map.
func TestOpenPinnedMapsSaysServicesIsOfTheLayoutBeforeGenerations(t *testing.T) {
	cfg := pinnedConfig(t)
	fe := lb.MustParseL3n4Addr("10.96.0.1:80/TCP")
	err := openPinnedBesideOlderServices(t, cfg, func() {
		pinInlineServices(t, cfg, []bpf.ServiceKey{bpf.NewServiceKey(fe, 0)}, []bpf.ServiceValue{{RevNatID: 1}})
	})
	for _, want := range []string{"lb_services", "before master generations", "older version"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
