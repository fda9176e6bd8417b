package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
)

// An agent upgraded across a change of lb_services' value finds the map
// pinned with an older layout: 24 bytes, one entry per slot (before a
// frontend's first slots moved into its master entry, InlineSlots), or
// 88 bytes (before masters carried a generation, ServiceValue.Gen).
// Refusing it would make every upgrade choose between not starting and
// --lb-recreate-maps, which loses every frontend ID that established
// flows and affinity entries name. So the map is migrated at open: its
// entries are read, written in the new layout into a new map, and the
// new map's pin replaces the old one in one rename. IDs, slots and
// counts are kept; flows keep their backends (conntrack names IDs, which
// do not change). A datapath loaded before the upgrade keeps reading the
// old map, no longer written, until the new one is loaded.

// The sizes of lb_service_value in older layouts.
const (
	oldServiceValueSize    = 24 // before inline slots
	inlineServiceValueSize = 88 // inline slots, before generations
)

// olderServiceLayout names the change an older layout of lb_services'
// value (of size n) predates, "" for a size of no older layout.
func olderServiceLayout(n uint32) string {
	switch n {
	case oldServiceValueSize:
		return "inline slots"
	case inlineServiceValueSize:
		return "master generations"
	}
	return ""
}

// MigratedMap says that NewKernelMaps converted a pinned map to this
// version's layout, keeping its entries.
type MigratedMap struct {
	Name    string
	Entries int // the entries read from the old map
}

// migrateServices converts the lb_services pinned at path, whose value is
// of an older layout, to ms's layout, with a generation in each master
// (from gens), and pins the result at path. It returns nil, nil when the
// pinned map is not of an older layout. With
// keepSize (ms has the default size) the new map is at least as large as
// the old, as openPinned keeps a pinned size then; else it has ms's size,
// the one the next start asks for, and entries that do not fit in it are
// an error naming flag (with recreate, nil, nil: openPinned recreates it).
func migrateServices(ms *ebpf.MapSpec, path string, keepSize, recreate bool, flag string, gens *genCounter) (*ebpf.Map, int, error) {
	old, err := ebpf.LoadPinnedMap(path, &ebpf.LoadPinOptions{ReadOnly: true})
	if err != nil {
		return nil, 0, nil
	}
	defer old.Close()
	change := olderServiceLayout(old.ValueSize())
	if old.Type() != ms.Type || old.KeySize() != ms.KeySize || change == "" {
		return nil, 0, nil
	}
	keys, vals, n, err := convertServices(old)
	if err != nil {
		return nil, 0, fmt.Errorf("map %s: migrate to %s: %w", path, change, err)
	}
	for i := range keys {
		vals[i] = gens.stamp(keys[i], vals[i])
	}
	spec := ms.Copy()
	spec.Pinning = ebpf.PinNone
	if keepSize {
		spec.MaxEntries = max(spec.MaxEntries, old.MaxEntries())
	} else if len(keys) > int(spec.MaxEntries) {
		if recreate {
			return nil, 0, nil
		}
		return nil, 0, fmt.Errorf("map %s: migrate to %s: %d entries in the new layout, more than the %d that %s gives it:"+
			" raise %s, or restart with --lb-recreate-maps (its entries are lost)", path, change, len(keys), spec.MaxEntries, flag, flag)
	}
	m, err := ebpf.NewMap(spec)
	if err != nil {
		return nil, 0, fmt.Errorf("map %s: migrate to %s: create: %w", path, change, err)
	}
	for i := range keys {
		if err := m.Put(keys[i], vals[i]); err != nil {
			m.Close()
			return nil, 0, fmt.Errorf("map %s: migrate to %s: write %s slot %d: %w", path, change, keys[i].L3n4Addr(), keys[i].Slot, err)
		}
	}
	// Pinned beside the old map, then renamed over it: the path names
	// the old map or the new, never neither. (bpffs refuses dots in
	// names.)
	tmp := path + "_migrating"
	os.Remove(tmp) // a failed migration's
	if err := m.Pin(tmp); err != nil {
		m.Close()
		return nil, 0, fmt.Errorf("map %s: migrate to %s: pin: %w", path, change, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		m.Close()
		return nil, 0, errors.Join(fmt.Errorf("map %s: migrate to %s: rename: %w", path, change, err), os.Remove(tmp))
	}
	return m, n, nil
}

// convertServices reads the older layout's entries of old and returns
// them in the new one. From 24 bytes, a master takes the IDs of its slots
// 1..InlineSlots, whose entries go; slot entries past them stay; an
// inline slot whose master is missing goes too (no datapath read it).
// From 88 bytes, every entry stays as it is. n counts the entries read.
func convertServices(old *ebpf.Map) (keys []ServiceKey, vals []ServiceValue, n int, err error) {
	masters := map[ServiceKey]int{} // index in keys
	type slot struct {
		master ServiceKey
		slot   uint16
		id     uint32
	}
	var inline []slot
	var k ServiceKey
	raw := make([]byte, old.ValueSize())
	it := old.Iterate()
	for it.Next(&k, &raw) {
		n++
		v := decodeOldServiceValue(raw)
		switch {
		case len(raw) == inlineServiceValueSize:
		case k.Slot == 0:
			masters[k] = len(keys)
		case !HasEntry(int(k.Slot)):
			mk := k
			mk.Slot = 0
			inline = append(inline, slot{mk, k.Slot, v.BackendID})
			continue
		}
		keys, vals = append(keys, k), append(vals, v)
	}
	if err := it.Err(); err != nil {
		return nil, nil, 0, err
	}
	for _, s := range inline {
		if i, ok := masters[s.master]; ok && int(s.slot) <= vals[i].Slots() {
			vals[i].Backends[s.slot-1] = s.id
		}
	}
	return keys, vals, n, nil
}

// decodeOldServiceValue reads a value of an older layout: the fields of
// ServiceValue before Gen (before Backends, from 24 bytes), at the same
// offsets.
func decodeOldServiceValue(b []byte) ServiceValue {
	le := binary.LittleEndian // bpfel, as the objects are built
	v := ServiceValue{
		BackendID: le.Uint32(b[0:]),
		RevNatID:  le.Uint32(b[4:]),
		ServiceMaster: ServiceMaster{
			AffinityTimeout: le.Uint32(b[8:]),
			Count:           le.Uint16(b[12:]),
			Standby:         le.Uint16(b[14:]),
			Type:            b[16],
			Flags:           b[17],
			Algorithm:       b[18],
			Pad:             b[19],
			ProxyPort:       [2]byte{b[20], b[21]},
			Fallback:        le.Uint16(b[22:]),
		},
	}
	for i := range v.Backends {
		if off := oldServiceValueSize + 4*i; off+4 <= len(b) {
			v.Backends[i] = le.Uint32(b[off:])
		}
	}
	return v
}
