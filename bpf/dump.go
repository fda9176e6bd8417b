package bpf

import (
	"cmp"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/lbstate/lbstate/internal/jsontext"
	"github.com/lbstate/lbstate/lb"
)

// Dump is a snapshot of all maps in a readable, sorted form: the same for
// kernel and in-memory maps with the same contents. WriteText prints one
// line per entry:
//
//	backend ID ADDR STATE [cluster=N] [zone=N]
//	maglev REVNAT size=M sum=FNV32 ID:SLOTS...
//	revnat REVNAT ADDR:PORT
//	service FRONTEND master revnat=ID type=T algorithm=A count=N standby=N [fallback=N] [affinity=S] [proxy-port=P] [flags=F,...]
//	service FRONTEND slot=N backend=ID
//	srcrange REVNAT PREFIX
//	affinity REVNAT CLIENT backend=ID
//
// sorted by map, then by key (IDs numerically, frontends by address, then
// slot). A slot or Maglev element that rejects flows (BackendReject)
// prints "reject" for its ID. An entry's line past its map's name, and
// its JSON, come from its map's field list in abi.go: a field added
// there shows here.
type Dump struct {
	Backends     []BackendEntry     `json:"backends"`
	Maglev       []MaglevEntry      `json:"maglev"`
	RevNat       []RevNatEntry      `json:"revnat"`
	Services     []ServiceEntry     `json:"services"`
	SourceRanges []SourceRangeEntry `json:"sourceRanges"`
	Affinity     []AffinityEntry    `json:"affinity"`
	// FlowSeed is the node's flow hash seed in hex (lb_flow_seed), for
	// lbctl explain to predict Maglev choices; empty for the zero seed.
	// The text dump leaves it out: dumps of kernel and in-memory maps
	// compare equal.
	FlowSeed string `json:"flowSeed,omitempty"`
}

// BackendEntry is one lb_backends entry (its ID is Backend.ID), shown as
// backendFields says; in JSON, one object of those fields.
type BackendEntry struct {
	Backend
}

func (e BackendEntry) MarshalJSON() ([]byte, error) { return marshalObject(backendFields, &e.Backend) }

func (e *BackendEntry) UnmarshalJSON(data []byte) error {
	*e = BackendEntry{}
	return unmarshalObject(backendFields, &e.Backend, data)
}

// MaglevEntry is one lb_maglev table, summed up: its size, a checksum and
// each backend's share of it.
type MaglevEntry struct {
	RevNatID uint32 `json:"revNatID"`
	Size     int    `json:"size"`
	// Sum is an FNV-32a checksum of the table, so that dumps tell tables
	// apart without listing every slot.
	Sum uint32 `json:"sum"`
	// Slots counts the slots of each backend ID.
	Slots map[uint32]int `json:"slots"`
}

// RevNatEntry is one lb_rev_nat entry (its ID is RevNatValue.ID), shown
// as revNatFields says.
type RevNatEntry struct {
	RevNatValue
}

func (e RevNatEntry) MarshalJSON() ([]byte, error) {
	return marshalObject(revNatFields, &e.RevNatValue)
}

func (e *RevNatEntry) UnmarshalJSON(data []byte) error {
	*e = RevNatEntry{}
	return unmarshalObject(revNatFields, &e.RevNatValue, data)
}

// ServiceEntry is one lb_services entry: its frontend and slot (the key)
// and its value. Dumps show a master entry's fields as masterFields says
// and a slot's backend ID (slotFields); in JSON, one object with the
// frontend, the slot and those fields.
type ServiceEntry struct {
	Frontend lb.L3n4Addr
	Slot     uint16
	ServiceValue
}

// fields returns the codec of the entry's kind (master or slot).
func (e *ServiceEntry) fields() []field[ServiceValue] {
	if e.Slot > 0 {
		return slotFields
	}
	return masterFields
}

// MarshalJSON writes the entry as one object (see ServiceEntry).
func (e ServiceEntry) MarshalJSON() ([]byte, error) { return e.appendJSON(nil) }

func (e *ServiceEntry) appendJSON(b []byte) ([]byte, error) {
	fe, err := e.Frontend.MarshalText()
	if err != nil {
		return nil, err
	}
	b = jsontext.String(append(b, `{"frontend":`...), fe)
	b = append(b, `,"slot":`...)
	b = strconv.AppendUint(b, uint64(e.Slot), 10)
	if b, err = appendJSON(b, e.fields(), &e.ServiceValue); err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (e *ServiceEntry) UnmarshalJSON(data []byte) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return err
	}
	*e = ServiceEntry{}
	if err := json.Unmarshal(obj["frontend"], &e.Frontend); err != nil {
		return fmt.Errorf("service entry: frontend: %w", err)
	}
	if raw, ok := obj["slot"]; ok {
		if err := json.Unmarshal(raw, &e.Slot); err != nil {
			return fmt.Errorf("service entry %s: slot: %w", e.Frontend, err)
		}
	}
	if err := parseJSON(e.fields(), &e.ServiceValue, obj); err != nil {
		return fmt.Errorf("service entry %s slot %d: %w", e.Frontend, e.Slot, err)
	}
	return nil
}

// SourceRangeEntry is one lb_src_range entry, shown as sourceRangeFields
// says.
type SourceRangeEntry struct {
	SourceRangeKey
}

func (e SourceRangeEntry) MarshalJSON() ([]byte, error) {
	return marshalObject(sourceRangeFields, &e.SourceRangeKey)
}

func (e *SourceRangeEntry) UnmarshalJSON(data []byte) error {
	*e = SourceRangeEntry{}
	return unmarshalObject(sourceRangeFields, &e.SourceRangeKey, data)
}

// AffinityEntry is one lb_affinity entry, shown as affinityFields says.
type AffinityEntry struct {
	AffinityKey
	AffinityValue
}

func (e AffinityEntry) MarshalJSON() ([]byte, error) { return marshalObject(affinityFields, &e) }

func (e *AffinityEntry) UnmarshalJSON(data []byte) error {
	*e = AffinityEntry{}
	return unmarshalObject(affinityFields, e, data)
}

// TakeDump reads every map of m.
func TakeDump(m *Maps) (*Dump, error) {
	d := &Dump{}
	err := m.Backends.Iterate(func(id uint32, b Backend) bool {
		b.ID = id
		d.Backends = append(d.Backends, BackendEntry{b})
		return true
	})
	if err == nil {
		err = m.Maglev.Iterate(func(id uint32, table []uint32) bool {
			e := MaglevEntry{RevNatID: id, Size: len(table), Slots: map[uint32]int{}}
			h := fnv.New32a()
			for _, b := range table {
				e.Slots[b]++
				h.Write([]byte{byte(b), byte(b >> 8), byte(b >> 16), byte(b >> 24)})
			}
			e.Sum = h.Sum32()
			d.Maglev = append(d.Maglev, e)
			return true
		})
	}
	if err == nil {
		err = m.RevNat.Iterate(func(id uint32, v RevNatValue) bool {
			v.ID = id
			d.RevNat = append(d.RevNat, RevNatEntry{v})
			return true
		})
	}
	if err == nil {
		err = m.Services.Iterate(func(k ServiceKey, v ServiceValue) bool {
			d.Services = appendServiceEntries(d.Services, k, v)
			return true
		})
	}
	if err == nil {
		err = m.SourceRanges.Iterate(func(k SourceRangeKey, _ uint8) bool {
			d.SourceRanges = append(d.SourceRanges, SourceRangeEntry{k})
			return true
		})
	}
	if err == nil {
		err = m.Affinity.Iterate(func(k AffinityKey, v AffinityValue) bool {
			d.Affinity = append(d.Affinity, AffinityEntry{k, v})
			return true
		})
	}
	if err != nil {
		return nil, err
	}
	if seed, err := m.Seed(); err != nil {
		return nil, err
	} else if !seed.IsZero() {
		d.FlowSeed = seed.String()
	}
	d.sort()
	return d, nil
}

// NewServiceEntry returns the lb_services entry of k and v as dumps show
// it: a slot's backend ID, or a master's fields (ServiceMaster and the
// rev-NAT ID); what they leave out is zero. A master's inline slots are
// not in it: appendServiceEntries shows them.
func NewServiceEntry(k ServiceKey, v ServiceValue) ServiceEntry {
	e := ServiceEntry{Frontend: k.L3n4Addr(), Slot: k.Slot}
	if k.Slot > 0 {
		e.BackendID = v.BackendID
		return e
	}
	e.RevNatID, e.ServiceMaster = v.RevNatID, v.ServiceMaster
	return e
}

// ServiceEntries returns how many lb_services entries the dump's services
// are in the map: its masters and the slots past the inline ones (the
// dump shows inline slots as entries too).
func (d *Dump) ServiceEntries() int {
	n := 0
	for _, e := range d.Services {
		if e.Slot == 0 || HasEntry(int(e.Slot)) {
			n++
		}
	}
	return n
}

// appendServiceEntries appends the entries that k and v show in dumps: a
// slot's, or a master's followed by one per inline slot, as if each had
// an entry of its own. Dumps show slots, wherever the map keeps them, so
// that they read (and compare) the same whatever InlineSlots is.
func appendServiceEntries(es []ServiceEntry, k ServiceKey, v ServiceValue) []ServiceEntry {
	es = append(es, NewServiceEntry(k, v))
	if k.Slot > 0 {
		return es
	}
	for i, id := range v.Inline() {
		k.Slot = uint16(i + 1)
		es = append(es, NewServiceEntry(k, ServiceValue{BackendID: id}))
	}
	return es
}

func (d *Dump) sort() {
	slices.SortFunc(d.Backends, func(a, b BackendEntry) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(d.Maglev, func(a, b MaglevEntry) int { return cmp.Compare(a.RevNatID, b.RevNatID) })
	slices.SortFunc(d.RevNat, func(a, b RevNatEntry) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(d.Services, func(a, b ServiceEntry) int {
		if c := a.Frontend.Compare(b.Frontend); c != 0 {
			return c
		}
		return cmp.Compare(a.Slot, b.Slot)
	})
	slices.SortFunc(d.SourceRanges, func(a, b SourceRangeEntry) int {
		if c := cmp.Compare(a.RevNatID, b.RevNatID); c != 0 {
			return c
		}
		ap, bp := a.Prefix(), b.Prefix()
		if c := ap.Addr().Compare(bp.Addr()); c != 0 {
			return c
		}
		return cmp.Compare(ap.Bits(), bp.Bits())
	})
	slices.SortFunc(d.Affinity, func(a, b AffinityEntry) int {
		if c := cmp.Compare(a.RevNatID, b.RevNatID); c != 0 {
			return c
		}
		return netip.AddrFrom16(a.Client).Unmap().Compare(netip.AddrFrom16(b.Client).Unmap())
	})
}

// WriteText writes the dump in the line format described on Dump.
func (d *Dump) WriteText(w io.Writer) error {
	var sb strings.Builder
	var line []byte
	for i := range d.Backends {
		line = append(appendText(append(line[:0], "backend"...), backendFields, &d.Backends[i].Backend), '\n')
		sb.Write(line)
	}
	for _, m := range d.Maglev {
		fmt.Fprintf(&sb, "maglev %d size=%d sum=%08x", m.RevNatID, m.Size, m.Sum)
		for _, id := range slices.Sorted(maps.Keys(m.Slots)) {
			fmt.Fprintf(&sb, " %s:%d", backendIDString(id), m.Slots[id])
		}
		sb.WriteByte('\n')
	}
	for i := range d.RevNat {
		line = append(appendText(append(line[:0], "revnat"...), revNatFields, &d.RevNat[i].RevNatValue), '\n')
		sb.Write(line)
	}
	for i := range d.Services {
		e := &d.Services[i]
		line = fmt.Appendf(line[:0], "service %s", e.Frontend)
		if e.Slot > 0 {
			line = fmt.Appendf(line, " slot=%d", e.Slot)
		} else {
			line = append(line, " master"...)
		}
		line = append(appendText(line, e.fields(), &e.ServiceValue), '\n')
		sb.Write(line)
	}
	for i := range d.SourceRanges {
		line = append(appendText(append(line[:0], "srcrange"...), sourceRangeFields, &d.SourceRanges[i].SourceRangeKey), '\n')
		sb.Write(line)
	}
	for i := range d.Affinity {
		line = append(appendText(append(line[:0], "affinity"...), affinityFields, &d.Affinity[i]), '\n')
		sb.Write(line)
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

// backendIDString prints a slot's backend ID: "reject" for BackendReject.
func backendIDString(id uint32) string {
	if id == BackendReject {
		return "reject"
	}
	return strconv.FormatUint(uint64(id), 10)
}
