package bpf_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// A full map refuses a new key with ErrMapFull naming the map, and still
// takes updates of the keys it holds.
func TestFullMapRefusesNewKeysButUpdatesExistingOnes(t *testing.T) {
	cfg := smallConfig()
	implementations(t, cfg, func(t *testing.T, m *bpf.Maps) {
		key := func(i int) bpf.ServiceKey {
			return bpf.NewServiceKey(lb.MustParseL3n4Addr(fmt.Sprintf("10.96.0.%d:80/TCP", i)), 0)
		}
		for i := range int(cfg.LBServicesMax) {
			if err := m.Services.Update(key(i), bpf.ServiceValue{RevNatID: uint32(i + 1)}); err != nil {
				t.Fatalf("service %d: %v", i, err)
			}
		}
		err := m.Services.Update(key(200), bpf.ServiceValue{})
		if !errors.Is(err, bpf.ErrMapFull) || !strings.Contains(err.Error(), "lb_services") {
			t.Fatalf("one service too many: %v, want ErrMapFull naming lb_services", err)
		}
		var full *bpf.MapFullError
		if !errors.As(err, &full) || full.Map != "lb_services" || full.MaxEntries != int(cfg.LBServicesMax) {
			t.Fatalf("one service too many: %#v, want a *MapFullError of lb_services, %d entries", err, cfg.LBServicesMax)
		}
		if err := m.Services.Update(key(3), bpf.ServiceValue{RevNatID: 33}); err != nil {
			t.Fatalf("updating an existing key of a full map: %v", err)
		}
	})
}

// The LPM trie and the map of Maglev tables report ErrMapFull too, though
// the kernel says "full" differently for them (ENOSPC, E2BIG on the outer
// map). Once, they did not.
func TestFullTrieAndMaglevMapsReportErrMapFull(t *testing.T) {
	cfg := smallConfig()
	cfg.LBSourceRangesMax = 2
	cfg.LBMaglevMax = 1
	implementations(t, cfg, func(t *testing.T, m *bpf.Maps) {
		for i, p := range []string{"10.0.0.0/8", "192.168.0.0/16"} {
			if err := m.SourceRanges.Update(bpf.NewSourceRangeKey(uint32(i+1), mustPrefix(p)), 1); err != nil {
				t.Fatal(err)
			}
		}
		err := m.SourceRanges.Update(bpf.NewSourceRangeKey(3, mustPrefix("172.16.0.0/12")), 1)
		if !errors.Is(err, bpf.ErrMapFull) || !strings.Contains(err.Error(), "lb_src_range") {
			t.Errorf("3rd source range in a map of 2: %v, want ErrMapFull naming lb_src_range", err)
		}
		table := make([]uint32, m.Maglev.TableSize())
		if err := m.Maglev.Update(1, table); err != nil {
			t.Fatal(err)
		}
		err = m.Maglev.Update(2, table)
		if !errors.Is(err, bpf.ErrMapFull) || !strings.Contains(err.Error(), "lb_maglev") {
			t.Errorf("2nd Maglev table in a map of 1: %v, want ErrMapFull naming lb_maglev", err)
		}
	})
}

// lb_affinity is an LRU map: when full, a new entry evicts an old one
// instead of failing.
func TestFullAffinityMapEvictsInsteadOfFailing(t *testing.T) {
	implementations(t, smallConfig(), func(t *testing.T, m *bpf.Maps) {
		for i := range 10 {
			if err := m.Affinity.Update(bpf.AffinityKey{RevNatID: uint32(i)}, bpf.AffinityValue{BackendID: 1}); err != nil {
				t.Fatalf("affinity %d: %v", i, err)
			}
		}
		n := 0
		m.Affinity.Iterate(func(bpf.AffinityKey, bpf.AffinityValue) bool { n++; return true })
		if n > 4 {
			t.Errorf("an LRU map of 4 holds %d entries", n)
		}
		if _, ok, _ := m.Affinity.Lookup(bpf.AffinityKey{RevNatID: 9}); !ok {
			t.Error("the entry written last was evicted")
		}
	})
}

// Each map's capacity is known, with the flag that sets it, so that a
// writer can tell how much room is left and what to raise.
func TestCapacityNamesEachMapsSizeAndFlag(t *testing.T) {
	implementations(t, smallConfig(), func(t *testing.T, m *bpf.Maps) {
		for name, want := range map[string]bpf.Capacity{
			"lb_services": {MaxEntries: 64, Flag: "--lb-services-max"},
			"lb_backends": {MaxEntries: 8, Flag: "--lb-backends-max"},
			"lb_id_marks": {MaxEntries: 2},
		} {
			if got, ok := m.Capacity(name); !ok || got != want {
				t.Errorf("Capacity(%q) = %+v, %v; want %+v", name, got, ok, want)
			}
		}
		if _, ok := m.Capacity("lb_nonesuch"); ok {
			t.Error("a map the set does not have has a capacity")
		}
	})
}

// With no flag the maps hold 100,000 Services of 10 endpoints each, as
// kube-proxy does: a ClusterIP frontend takes a master entry and one
// slot a backend in lb_services, each distinct endpoint a slot of
// lb_backends, each frontend one of lb_rev_nat, and room is left over
// for NodePort frontends and for new endpoints appearing before old ones
// go. Once, 10,000 such services did not fit the defaults. The kernel
// run at this size is TestDefaultMapsServe100kServicesOf10Backends in
// the reconciler.
func TestDefaultMapsHold100kServicesOf10Backends(t *testing.T) {
	const services, backends = 100_000, 10
	cfg := bpf.DefaultConfig
	for _, c := range []struct {
		flag       string
		max        uint32
		need, room int
	}{
		{"--lb-services-max", cfg.LBServicesMax, services * (1 + backends), services * (1 + backends) / 2},
		{"--lb-backends-max", cfg.LBBackendsMax, services * backends, services * backends / 25},
		{"--lb-rev-nat-max", cfg.LBRevNatMax, services, services},
	} {
		if int(c.max) < c.need+c.room {
			t.Errorf("%s defaults to %d: %d services x %d backends need %d, and %d more are meant to be free",
				c.flag, c.max, services, backends, c.need, c.room)
		}
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("the default configuration: %v", err)
	}
}
