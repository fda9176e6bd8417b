package lb

import "sync"

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
// their number is bounded: past 65,535 distinct names, ZoneOf gives a
// new name the zero Zone, which the datapath treats as it treats any
// zone without an ID of its own (a reconciler registers the zones it
// gives IDs to when it starts, before any source's).
type Zone uint16

// zones is the process's table of zone names.
var zones = newZoneTable(1 << 16)

// zoneTable holds zone names, "" first, each under the Zone that is its
// index; at most max of them.
type zoneTable struct {
	mu    sync.RWMutex
	ids   map[string]Zone
	names []string
	max   int
}

func newZoneTable(max int) *zoneTable {
	return &zoneTable{ids: map[string]Zone{}, names: []string{""}, max: max}
}

// ZoneOf returns the zone named name ("" gives the zero Zone).
func ZoneOf(name string) Zone { return zones.of(name) }

func (t *zoneTable) of(name string) Zone {
	if name == "" {
		return 0
	}
	t.mu.RLock()
	z, ok := t.ids[name]
	t.mu.RUnlock()
	if ok {
		return z
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if z, ok := t.ids[name]; ok {
		return z
	}
	if len(t.names) >= t.max {
		return 0
	}
	z = Zone(len(t.names))
	name = string([]byte(name)) // not a slice of a larger object the caller holds
	t.names = append(t.names, name)
	t.ids[name] = z
	return z
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
