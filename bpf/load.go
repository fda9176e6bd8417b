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
		// lb_rev_nat keeps an address and port only; the protocol is moot.
		addr := lb.NewL3n4Addr(lb.ProtoAny, e.Address.Addr(), e.Address.Port(), lb.ScopeExternal)
		if err := m.RevNat.Update(e.RevNatID, NewRevNatValue(addr)); err != nil {
			return err
		}
	}
	for _, e := range d.Services {
		if err := m.Services.Update(NewServiceKey(e.Frontend, e.Slot), e.ServiceValue); err != nil {
			return err
		}
	}
	for _, e := range d.SourceRanges {
		if err := m.SourceRanges.Update(NewSourceRangeKey(e.RevNatID, e.Prefix), 1); err != nil {
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
		k := AffinityKey{Client: e.Client.As16(), RevNatID: e.RevNatID}
		if err := m.Affinity.Update(k, AffinityValue{BackendID: e.BackendID, LastUsed: e.LastUsed, Slot: e.Slot}); err != nil {
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
