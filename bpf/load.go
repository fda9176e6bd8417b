package bpf

import (
	"fmt"
	"maps"

	"github.com/lbstate/lbstate/lb"
)

// LoadDump writes the entries of d into m, so that code that walks Maps
// (lbctl explain) can walk a dump taken elsewhere, such as the one an
// agent serves with DumpHandler. m is meant to be empty in-memory maps
// with room for d, and with d's Maglev table size.
//
// The dump's flow hash seed replaces m's (the zero one if the dump has
// none). What a dump does not keep is not restored: a Maglev entry is written only
// when maglevTables (by rev-NAT ID) has its table, affinity entries lose
// their last-used time, and lb_id_marks stays empty. A table that does not
// match its entry's slot counts is an error: the maps changed between the
// dump and the table's read.
func LoadDump(m *Maps, d *Dump, maglevTables map[uint32][]uint32) error {
	for _, e := range d.Backends {
		if err := m.Backends.Update(e.ID, e.Backend); err != nil {
			return err
		}
	}
	for _, e := range d.Maglev {
		table, ok := maglevTables[e.RevNatID]
		if !ok {
			continue
		}
		if err := checkMaglevTable(e, table); err != nil {
			return err
		}
		if err := m.Maglev.Update(e.RevNatID, table); err != nil {
			return err
		}
	}
	for _, e := range d.RevNat {
		if err := m.RevNat.Update(e.ID, e.RevNatValue); err != nil {
			return err
		}
	}
	if err := loadServices(m, d.Services); err != nil {
		return err
	}
	for _, e := range d.SourceRanges {
		if err := m.SourceRanges.Update(e.SourceRangeKey, 1); err != nil {
			return err
		}
	}
	var seed FlowSeed // the zero seed, for a dump without one
	if d.FlowSeed != "" {
		var err error
		if seed, err = ParseFlowSeed(d.FlowSeed); err != nil {
			return err
		}
	}
	if err := m.FlowSeed.Update(0, seed); err != nil {
		return err
	}
	for _, e := range d.Affinity {
		if err := m.Affinity.Update(e.AffinityKey, e.AffinityValue); err != nil {
			return err
		}
	}
	return nil
}

// checkMaglevTable fails unless table is the one e describes: its size
// and each backend's slot count.
func checkMaglevTable(e MaglevEntry, table []uint32) error {
	counts := make(map[uint32]int, len(e.Slots))
	for _, id := range table {
		counts[id]++
	}
	if len(table) != e.Size || !maps.Equal(counts, e.Slots) {
		return fmt.Errorf("lb_maglev %d: the table does not match the dump (the maps changed while being read)", e.RevNatID)
	}
	return nil
}

// loadServices writes the lb_services entries of a dump, which shows
// every slot as an entry (appendServiceEntries): a master's inline slots
// go back into its value. An inline slot whose master the dump lacks is
// written as an entry of its own, as the dump shows it.
func loadServices(m *Maps, es []ServiceEntry) error {
	masters := map[lb.L3n4Addr]int{} // index in es
	for i, e := range es {
		if e.Slot == 0 {
			masters[e.Frontend] = i
		}
	}
	values := make([]ServiceValue, len(es))
	for i, e := range es {
		values[i] = e.ServiceValue
	}
	own := make([]bool, len(es)) // written as an entry of its own
	for i, e := range es {
		mi, ok := masters[e.Frontend]
		if e.Slot == 0 || HasEntry(int(e.Slot)) || !ok {
			own[i] = true
			continue
		}
		values[mi].Backends[e.Slot-1] = e.BackendID
	}
	for i, e := range es {
		if own[i] {
			if err := m.Services.Update(NewServiceKey(e.Frontend, e.Slot), values[i]); err != nil {
				return err
			}
		}
	}
	return nil
}
