package bpf_test

import (
	"errors"
	"net/netip"
	"reflect"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// implementations runs fn against in-memory maps and kernel maps with the
// same configuration: the behaviour tested must be the same in both.
func implementations(t *testing.T, cfg bpf.Config, fn func(t *testing.T, m *bpf.Maps)) {
	t.Run("memory", func(t *testing.T) {
		m, err := bpf.NewMemoryMaps(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		fn(t, m)
	})
	t.Run("kernel", func(t *testing.T) {
		kcfg := bpftest.Config(t)
		cfg.LBPinDir = kcfg.LBPinDir
		fn(t, bpftest.KernelMaps(t, cfg))
	})
}

func smallConfig() bpf.Config {
	cfg := bpf.DefaultConfig
	cfg.LBServicesMax, cfg.LBBackendsMax, cfg.LBAffinityMax = 64, 8, 4
	cfg.LBMaglevTableSize = 251
	return cfg
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func TestLookupFindsWhatUpdateWroteAndDeletingTwiceSucceeds(t *testing.T) {
	implementations(t, smallConfig(), func(t *testing.T, m *bpf.Maps) {
		fe := lb.MustParseL3n4Addr("10.96.0.1:80/TCP")
		k := bpf.NewServiceKey(fe, 0)
		v := bpf.ServiceValue{RevNatID: 7, ServiceMaster: bpf.ServiceMaster{Count: 2, Type: 1}}
		if err := m.Services.Update(k, v); err != nil {
			t.Fatal(err)
		}
		got, ok, err := m.Services.Lookup(k)
		if err != nil || !ok || got != v {
			t.Fatalf("Lookup: %+v %v %v, want %+v", got, ok, err, v)
		}
		if _, ok, _ := m.Services.Lookup(bpf.NewServiceKey(fe, 1)); ok {
			t.Fatal("found a key never written")
		}
		if err := m.Services.Delete(k); err != nil {
			t.Fatal(err)
		}
		if err := m.Services.Delete(k); err != nil {
			t.Fatalf("deleting a missing key: %v", err)
		}
	})
}

// lb_id_marks is an array: every index below its capacity exists, zero
// until written; no other index can be written, and nothing deleted.
func TestIDMarksHaveEveryKindOfIDAndNoOther(t *testing.T) {
	implementations(t, smallConfig(), func(t *testing.T, m *bpf.Maps) {
		if v, ok, err := m.IDMarks.Lookup(bpf.IDMarkBackend); err != nil || !ok || v != 0 {
			t.Errorf("fresh IDMarks[backend]: %d found=%v err=%v, want 0 found", v, ok, err)
		}
		if err := m.IDMarks.Update(bpf.IDMarkBackend, 42); err != nil {
			t.Fatal(err)
		}
		if v, _, _ := m.IDMarks.Lookup(bpf.IDMarkBackend); v != 42 {
			t.Errorf("IDMarks[backend] after writing 42: %d", v)
		}
		if _, ok, _ := m.IDMarks.Lookup(2); ok {
			t.Error("found index 2 of a 2-entry array")
		}
		if err := m.IDMarks.Update(2, 1); !errors.Is(err, bpf.ErrMapFull) {
			t.Errorf("writing index 2 of a 2-entry array: %v, want ErrMapFull", err)
		}
		if err := m.IDMarks.Delete(bpf.IDMarkFrontend); err == nil {
			t.Error("deleting an array index succeeded")
		}
		var got []uint32
		m.IDMarks.Iterate(func(k, v uint32) bool { got = append(got, k, v); return true })
		if len(got) != 4 || got[0] != bpf.IDMarkFrontend || got[1] != 0 || got[2] != bpf.IDMarkBackend || got[3] != 42 {
			t.Errorf("iterated (key, value)s %v, want [0 0 1 42]", got)
		}
	})
}

// Both implementations fill every map field of Maps, each with a map of
// the layout, and every map of the layout has a field.
func TestEveryMapOfTheLayoutHasItsField(t *testing.T) {
	implementations(t, smallConfig(), func(t *testing.T, m *bpf.Maps) {
		v := reflect.ValueOf(m).Elem()
		names := map[string]bool{}
		for i := range v.NumField() {
			f := v.Field(i)
			if !v.Type().Field(i).IsExported() || f.Kind() != reflect.Interface {
				continue
			}
			if f.IsNil() {
				t.Errorf("field %s is nil", v.Type().Field(i).Name)
				continue
			}
			names[f.Interface().(interface{ Name() string }).Name()] = true
		}
		for _, name := range bpf.LayoutNames() {
			if !names[name] {
				t.Errorf("no field holds %s", name)
			}
		}
		if len(names) != len(bpf.LayoutNames()) {
			t.Errorf("fields hold %d maps, the layout has %d", len(names), len(bpf.LayoutNames()))
		}
	})
}

// Iterate yields every entry once, whether the map is read in batches
// (hash maps, more entries than one batch holds, stopping early too) or
// one entry at a time (LPM tries).
func TestIterateYieldsEveryEntryOnce(t *testing.T) {
	cfg := bpf.DefaultConfig
	cfg.LBServicesMax, cfg.LBSourceRangesMax = 4096, 16
	implementations(t, cfg, func(t *testing.T, m *bpf.Maps) {
		const n = 3000 // more than a batch
		want := map[bpf.ServiceKey]uint32{}
		var keys []bpf.ServiceKey
		var vals []bpf.ServiceValue
		for i := range n {
			k := bpf.NewServiceKey(lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), 80, lb.ScopeExternal), 0)
			keys, vals = append(keys, k), append(vals, bpf.ServiceValue{RevNatID: uint32(i + 1)})
			want[k] = uint32(i + 1)
		}
		if err := m.Services.BatchUpdate(keys, vals); err != nil {
			t.Fatal(err)
		}
		got := map[bpf.ServiceKey]uint32{}
		if err := m.Services.Iterate(func(k bpf.ServiceKey, v bpf.ServiceValue) bool {
			if _, dup := got[k]; dup {
				t.Errorf("%+v yielded twice", k)
			}
			got[k] = v.RevNatID
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Iterate yielded %d entries, want %d", len(got), len(want))
		}
		seen := 0
		if err := m.Services.Iterate(func(bpf.ServiceKey, bpf.ServiceValue) bool { seen++; return seen < 10 }); err != nil || seen != 10 {
			t.Fatalf("stopping at 10: saw %d, %v", seen, err)
		}

		ranges := []netip.Prefix{mustPrefix("10.0.0.0/8"), mustPrefix("192.168.1.0/24"), mustPrefix("2001:db8::/32")}
		for _, p := range ranges {
			if err := m.SourceRanges.Update(bpf.NewSourceRangeKey(7, p), 1); err != nil {
				t.Fatal(err)
			}
		}
		count := 0
		if err := m.SourceRanges.Iterate(func(bpf.SourceRangeKey, uint8) bool { count++; return true }); err != nil || count != len(ranges) {
			t.Fatalf("source ranges: %d entries, %v; want %d", count, err, len(ranges))
		}

		cpus, err := ebpf.PossibleCPU()
		if err != nil {
			t.Fatal(err)
		}
		perCPU := make([]bpf.CounterValue, cpus)
		perCPU[0].Flows = 3
		for id := range uint32(3) {
			if err := m.Counters.Update(bpf.CounterKey{RevNatID: 1, BackendID: id + 1}, perCPU); err != nil {
				t.Fatal(err)
			}
		}
		count = 0
		if err := m.Counters.Iterate(func(_ bpf.CounterKey, v []bpf.CounterValue) bool {
			if bpf.SumCounters(v).Flows != 3 {
				t.Errorf("counter values %+v, want 3 flows in all", v)
			}
			count++
			return true
		}); err != nil || count != 3 {
			t.Fatalf("per-CPU counters: %d entries, %v; want 3", count, err)
		}
	})
}
