package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// NewKernelMaps opens the maps pinned in cfg.LBPinDir, creating the ones
// that do not exist, so that a restarted agent finds the entries (and IDs)
// the datapath is using. A pinned map whose layout differs from this
// version's is an error, or is recreated empty with cfg.LBRecreateMaps.
func NewKernelMaps(cfg Config) (*Maps, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.LBPinDir, 0o755); err != nil {
		return nil, fmt.Errorf("pin directory: %w", err)
	}
	spec, err := loadLb()
	if err != nil {
		return nil, err
	}
	var opened []*ebpf.Map
	open := func(name string, maxEntries uint32) (*ebpf.Map, error) {
		ms := spec.Maps[name].Copy()
		ms.MaxEntries = maxEntries
		ms.Pinning = ebpf.PinByName
		if ms.InnerMap != nil {
			ms.InnerMap.ValueSize = 4 * cfg.LBMaglevTableSize
		}
		m, err := openPinned(ms, cfg)
		if err != nil {
			return nil, err
		}
		opened = append(opened, m)
		return m, nil
	}

	sizes := []uint32{cfg.LBServicesMax, cfg.LBBackendsMax, cfg.LBRevNatMax, cfg.LBMaglevMax, cfg.LBAffinityMax, cfg.LBSourceRangesMax, 2}
	for i, name := range mapNames {
		if _, err = open(name, sizes[i]); err != nil {
			closeMaps(opened)
			return nil, err
		}
	}
	return kernelMaps(opened, &kernelMaglev{outer: opened[3], inner: innerSpec(spec, cfg), size: int(cfg.LBMaglevTableSize)}), nil
}

// mapNames are the pinned maps, in the order kernelMaps takes them.
var mapNames = []string{lbMapLbServices, lbMapLbBackends, lbMapLbRevNat, lbMapLbMaglev, lbMapLbAffinity, lbMapLbSrcRange, lbMapLbIdMarks}

// kernelMaps wraps maps opened in mapNames' order.
func kernelMaps(ms []*ebpf.Map, maglev *kernelMaglev) *Maps {
	return &Maps{
		Kind:         "kernel",
		Services:     &kernelMap[ServiceKey, ServiceValue]{m: ms[0], name: mapNames[0]},
		Backends:     &kernelMap[uint32, Backend]{m: ms[1], name: mapNames[1]},
		RevNat:       &kernelMap[uint32, RevNatValue]{m: ms[2], name: mapNames[2]},
		Maglev:       maglev,
		Affinity:     &kernelMap[AffinityKey, AffinityValue]{m: ms[4], name: mapNames[4]},
		SourceRanges: &kernelMap[SourceRangeKey, uint8]{m: ms[5], name: mapNames[5]},
		IDMarks:      &kernelMap[uint32, uint32]{m: ms[6], name: mapNames[6]},
		close:        func() error { return closeMaps(ms) },
	}
}

func closeMaps(ms []*ebpf.Map) error {
	var errs []error
	for _, m := range ms {
		errs = append(errs, m.Close())
	}
	return errors.Join(errs...)
}

// openPinned opens or creates one pinned map, checking that an existing
// one fits the spec (for map-in-map, that its inner tables do too).
func openPinned(ms *ebpf.MapSpec, cfg Config) (*ebpf.Map, error) {
	path := filepath.Join(cfg.LBPinDir, ms.Name)
	m, err := ebpf.NewMapWithOptions(ms, ebpf.MapOptions{PinPath: cfg.LBPinDir})
	if err == nil && ms.InnerMap != nil {
		if err = checkInnerMaps(m, ms.InnerMap); err != nil {
			m.Close()
		}
	}
	if err != nil && errors.Is(err, ebpf.ErrMapIncompatible) && cfg.LBRecreateMaps {
		if rmErr := os.Remove(path); rmErr != nil {
			return nil, fmt.Errorf("map %s: recreate: %w", path, rmErr)
		}
		m, err = ebpf.NewMapWithOptions(ms, ebpf.MapOptions{PinPath: cfg.LBPinDir})
	}
	if errors.Is(err, ebpf.ErrMapIncompatible) {
		return nil, fmt.Errorf("map %s: the pinned map does not match this version's layout: %w"+
			" (restart with --lb-recreate-maps to recreate it; its entries are lost)", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", path, err)
	}
	return m, nil
}

// checkInnerMaps reports ErrMapIncompatible if the outer map takes no inner
// map of the spec's size (the Maglev table size changed): it looks at the
// first inner map, or, with none, tries inserting one.
func checkInnerMaps(outer *ebpf.Map, inner *ebpf.MapSpec) error {
	var key, id uint32
	it := outer.Iterate()
	if !it.Next(&key, &id) {
		if err := it.Err(); err != nil {
			return err
		}
		return probeInnerMap(outer, inner)
	}
	m, err := ebpf.NewMapFromID(ebpf.MapID(id))
	if err != nil {
		return fmt.Errorf("map %s: inner map %d: %w", outer.String(), id, err)
	}
	defer m.Close()
	if m.ValueSize() != inner.ValueSize {
		return fmt.Errorf("%w: inner tables hold %d bytes, want %d", ebpf.ErrMapIncompatible, m.ValueSize(), inner.ValueSize)
	}
	return nil
}

// innerSpec returns the spec of lb_maglev's inner tables, sized for the
// configured Maglev table.
func innerSpec(spec *ebpf.CollectionSpec, cfg Config) *ebpf.MapSpec {
	inner := spec.Maps[lbMapLbMaglev].InnerMap.Copy()
	inner.ValueSize = 4 * cfg.LBMaglevTableSize
	inner.Pinning = ebpf.PinNone
	return inner
}

// probeInnerMap inserts (and removes) an inner map of the spec into an
// empty outer map; the kernel refuses one that does not match the outer
// map's template.
func probeInnerMap(outer *ebpf.Map, inner *ebpf.MapSpec) error {
	m, err := ebpf.NewMap(inner)
	if err != nil {
		return fmt.Errorf("map %s: probing inner map: %w", outer.String(), err)
	}
	defer m.Close()
	const probeKey = ^uint32(0)
	if err := outer.Update(probeKey, m, ebpf.UpdateAny); err != nil {
		if errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("%w: inner tables of %d bytes do not fit: %w", ebpf.ErrMapIncompatible, inner.ValueSize, err)
		}
		return fmt.Errorf("map %s: probing inner map: %w", outer.String(), err)
	}
	return outer.Delete(probeKey)
}

type kernelMap[K comparable, V any] struct {
	m    *ebpf.Map
	name string
}

func (m *kernelMap[K, V]) Name() string { return m.name }

func (m *kernelMap[K, V]) Lookup(k K) (V, bool, error) {
	var v V
	err := m.m.Lookup(&k, &v)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return v, false, nil
	}
	if err != nil {
		return v, false, fmt.Errorf("%s: lookup: %w", m.name, err)
	}
	return v, true, nil
}

func (m *kernelMap[K, V]) Update(k K, v V) error {
	return m.wrap("update", m.m.Update(&k, &v, ebpf.UpdateAny))
}

func (m *kernelMap[K, V]) Delete(k K) error {
	if err := m.m.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return m.wrap("delete", err)
	}
	return nil
}

func (m *kernelMap[K, V]) wrap(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.E2BIG), errors.Is(err, unix.ENOSPC): // hash maps say E2BIG, LPM tries ENOSPC
		return fmt.Errorf("%s: %s: %w (%d entries): %w", m.name, op, ErrMapFull, m.m.MaxEntries(), err)
	}
	return fmt.Errorf("%s: %s: %w", m.name, op, err)
}

func (m *kernelMap[K, V]) BatchUpdate(ks []K, vs []V) error {
	if len(ks) != len(vs) {
		return fmt.Errorf("%s: batch update: %d keys but %d values", m.name, len(ks), len(vs))
	}
	if len(ks) == 0 {
		return nil
	}
	_, err := m.m.BatchUpdate(ks, vs, nil)
	if errors.Is(err, ebpf.ErrNotSupported) {
		for i := range ks {
			if err := m.Update(ks[i], vs[i]); err != nil {
				return err
			}
		}
		return nil
	}
	return m.wrap("batch update", err)
}

// BatchDelete deletes in batches, stepping over keys that are already
// gone (the kernel stops a batch at the first missing key).
func (m *kernelMap[K, V]) BatchDelete(ks []K) error {
	for len(ks) > 0 {
		n, err := m.m.BatchDelete(ks, nil)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ebpf.ErrNotSupported):
			for _, k := range ks {
				if err := m.Delete(k); err != nil {
					return err
				}
			}
			return nil
		case errors.Is(err, ebpf.ErrKeyNotExist):
			ks = ks[n+1:]
		default:
			return m.wrap("batch delete", err)
		}
	}
	return nil
}

func (m *kernelMap[K, V]) Iterate(fn func(K, V) bool) error {
	var (
		k K
		v V
	)
	it := m.m.Iterate()
	for it.Next(&k, &v) {
		if !fn(k, v) {
			break
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("%s: iterate: %w", m.name, err)
	}
	return nil
}

type kernelMaglev struct {
	outer *ebpf.Map
	inner *ebpf.MapSpec
	size  int
}

func (m *kernelMaglev) Name() string   { return lbMapLbMaglev }
func (m *kernelMaglev) TableSize() int { return m.size }

// Update writes the table into a new inner map and swaps it in, so that
// the datapath sees the old table or the new one.
func (m *kernelMaglev) Update(id uint32, table []uint32) error {
	if len(table) != m.size {
		return fmt.Errorf("%s: update %d: table has %d slots, want %d", lbMapLbMaglev, id, len(table), m.size)
	}
	inner, err := ebpf.NewMap(m.inner)
	if err != nil {
		return fmt.Errorf("%s: update %d: new inner map: %w", lbMapLbMaglev, id, err)
	}
	defer inner.Close()
	if err := inner.Update(uint32(0), table, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("%s: update %d: fill inner map: %w", lbMapLbMaglev, id, err)
	}
	if err := m.outer.Update(id, inner, ebpf.UpdateAny); err != nil {
		if errors.Is(err, unix.E2BIG) {
			return fmt.Errorf("%s: update %d: %w (%d entries): %w", lbMapLbMaglev, id, ErrMapFull, m.outer.MaxEntries(), err)
		}
		return fmt.Errorf("%s: update %d: %w", lbMapLbMaglev, id, err)
	}
	return nil
}

func (m *kernelMaglev) Delete(id uint32) error {
	if err := m.outer.Delete(id); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("%s: delete %d: %w", lbMapLbMaglev, id, err)
	}
	return nil
}

// Lookup reads a frontend's table. A concurrent Update may free the inner
// map between reading its ID and opening it; then the lookup starts over.
func (m *kernelMaglev) Lookup(id uint32) ([]uint32, bool, error) {
	for attempt := 0; ; attempt++ {
		var innerID uint32
		err := m.outer.Lookup(id, &innerID)
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("%s: lookup %d: %w", lbMapLbMaglev, id, err)
		}
		table, err := m.readInner(innerID)
		if err == nil {
			return table, true, nil
		}
		if !errors.Is(err, os.ErrNotExist) || attempt == 10 {
			return nil, false, fmt.Errorf("%s: lookup %d: %w", lbMapLbMaglev, id, err)
		}
	}
}

func (m *kernelMaglev) readInner(innerID uint32) ([]uint32, error) {
	inner, err := ebpf.NewMapFromID(ebpf.MapID(innerID))
	if err != nil {
		return nil, err
	}
	defer inner.Close()
	raw, err := inner.LookupBytes(uint32(0))
	if err != nil {
		return nil, err
	}
	table := make([]uint32, len(raw)/4)
	for i := range table {
		table[i] = binary.NativeEndian.Uint32(raw[4*i:])
	}
	return table, nil
}

func (m *kernelMaglev) Iterate(fn func(uint32, []uint32) bool) error {
	var id, innerID uint32
	it := m.outer.Iterate()
	for it.Next(&id, &innerID) {
		table, ok, err := m.Lookup(id) // by key: the table may have been swapped
		if err != nil {
			return fmt.Errorf("%s: iterate: %w", lbMapLbMaglev, err)
		}
		if !ok {
			continue // deleted meanwhile
		}
		if !fn(id, table) {
			break
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("%s: iterate: %w", lbMapLbMaglev, err)
	}
	return nil
}

// OpenPinnedMaps opens the maps pinned in dir, read-only in spirit: it
// creates nothing, and fails with a clear error when they are not there.
// For tools (lbctl) that look at an agent's maps.
func OpenPinnedMaps(dir string) (*Maps, error) {
	var opened []*ebpf.Map
	for _, name := range mapNames {
		m, err := ebpf.LoadPinnedMap(filepath.Join(dir, name), nil)
		if err != nil {
			closeMaps(opened)
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("no pinned map %s in %s (is an agent running with --lb-pin-dir %s?)", name, dir, dir)
			}
			return nil, fmt.Errorf("map %s in %s: %w", name, dir, err)
		}
		opened = append(opened, m)
	}
	maglev := &kernelMaglev{outer: opened[3]}
	var key, id uint32
	if it := opened[3].Iterate(); it.Next(&key, &id) {
		if inner, err := ebpf.NewMapFromID(ebpf.MapID(id)); err == nil {
			maglev.size = int(inner.ValueSize() / 4)
			inner.Close()
		}
	}
	return kernelMaps(opened, maglev), nil
}
