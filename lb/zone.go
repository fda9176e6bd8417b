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
var zones = struct {
	mu    sync.RWMutex
	ids   map[string]Zone
	names []string // by Zone; names[0] is ""
}{ids: map[string]Zone{}, names: []string{""}}

// maxZones is how many names zones holds, "" included.
const maxZones = 1 << 16

// ZoneOf returns the zone named name ("" gives the zero Zone).
func ZoneOf(name string) Zone {
	if name == "" {
		return 0
	}
	zones.mu.RLock()
	z, ok := zones.ids[name]
	zones.mu.RUnlock()
	if ok {
		return z
	}
	zones.mu.Lock()
	defer zones.mu.Unlock()
	if z, ok := zones.ids[name]; ok {
		return z
	}
	if len(zones.names) == maxZones {
		return 0
	}
	z = Zone(len(zones.names))
	name = string([]byte(name)) // not a slice of a larger object the caller holds
	zones.names = append(zones.names, name)
	zones.ids[name] = z
	return z
}

// String returns the zone's name ("" for the zero Zone).
func (z Zone) String() string {
	if z == 0 {
		return ""
	}
	zones.mu.RLock()
	defer zones.mu.RUnlock()
	if int(z) >= len(zones.names) { // not one ZoneOf gave
		return ""
	}
	return zones.names[z]
}

func (z Zone) IsZero() bool { return z == 0 }

func (z Zone) MarshalText() ([]byte, error) { return []byte(z.String()), nil }

func (z *Zone) UnmarshalText(b []byte) error {
	*z = ZoneOf(string(b))
	return nil
}
