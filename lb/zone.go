package lb

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Zone is a backend's zone as a frontend lists it (BackendRef.Zone): a
// 2-byte handle of a name kept once for the process, where a string
// takes 16 bytes. It brings a BackendRef from 48 bytes to 32, and a
// frontend row with its one backend inline from 208 to 192: a frontend's
// list is as long as its backends (110 for a global service of ten
// clusters), and every frontend row is allocated twice (the Writer's,
// then the reconciler's status write-back). The zero Zone is no zone.
// It prints, encodes and decodes as its name.
//
// Zone names come from sources (an EndpointSlice endpoint's zone), so
// their number is bounded: past 65,280 distinct names, ZoneOf gives a
// new name the zero Zone, which the datapath treats as it treats any
// zone without an ID of its own, and counts it (ZoneNamesRefused). The
// last 255 handles are kept for the zones a configuration gives IDs to
// (RegisterZone, one per datapath zone ID), so that those keep their
// IDs however many names sources brought first, in this hive or an
// earlier one of the process.
type Zone uint16

// configuredZones is the room kept for RegisterZone: one handle per
// datapath zone ID (1-255).
const configuredZones = 255

// zones is the process's table of zone names.
var zones = newZoneTable(1<<16, configuredZones)

// zoneTable holds zone names, "" first, each under the Zone that is its
// index; at most max of them, the last reserved of which only register
// hands out.
type zoneTable struct {
	mu       sync.RWMutex
	ids      map[string]Zone
	names    []string
	max      int
	reserved int
	refused  atomic.Uint64 // names of gives the zero Zone for want of room
}

func newZoneTable(max, reserved int) *zoneTable {
	return &zoneTable{ids: map[string]Zone{}, names: []string{""}, max: max, reserved: reserved}
}

// ZoneOf returns the zone named name ("" gives the zero Zone, and so does
// a new name once the table is full).
func ZoneOf(name string) Zone { return zones.of(name) }

// RegisterZone returns the zone named name, from the room kept for
// configured zones if sources have filled the rest; it fails only when a
// process registers more than 255 names that sources had not named.
func RegisterZone(name string) (Zone, error) { return zones.register(name) }

// ZoneNamesRefused returns how many times ZoneOf gave a name the zero
// Zone because the process's table of zone names was full.
func ZoneNamesRefused() uint64 { return zones.refused.Load() }

func (t *zoneTable) of(name string) Zone {
	z, ok := t.add(name, t.max-t.reserved)
	if !ok {
		t.refused.Add(1)
	}
	return z
}

func (t *zoneTable) register(name string) (Zone, error) {
	if z, ok := t.add(name, t.max); ok {
		return z, nil
	}
	return 0, fmt.Errorf("zone %q: no room for another zone name (%d held)", name, t.max)
}

// add returns the handle of name, adding it while the table holds fewer
// than limit names; false if it could not.
func (t *zoneTable) add(name string, limit int) (Zone, bool) {
	if name == "" {
		return 0, true
	}
	t.mu.RLock()
	z, ok := t.ids[name]
	t.mu.RUnlock()
	if ok {
		return z, true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if z, ok := t.ids[name]; ok {
		return z, true
	}
	if len(t.names) >= limit {
		return 0, false
	}
	z = Zone(len(t.names))
	name = string([]byte(name)) // not a slice of a larger object the caller holds
	t.names = append(t.names, name)
	t.ids[name] = z
	return z, true
}

func (t *zoneTable) name(z Zone) string {
	if z == 0 {
		return ""
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if int(z) >= len(t.names) { // not one of this table's
		return ""
	}
	return t.names[z]
}

// String returns the zone's name ("" for the zero Zone).
func (z Zone) String() string { return zones.name(z) }

func (z Zone) IsZero() bool { return z == 0 }

func (z Zone) MarshalText() ([]byte, error) { return []byte(z.String()), nil }

func (z *Zone) UnmarshalText(b []byte) error {
	*z = ZoneOf(string(b))
	return nil
}
