package reconciler

// A recount counts what the maps hold. An entry whose write failed is
// not there, yet its state still says it may be (so that its delete is
// not forgotten), and its retry then writes it without counting it
// again: a recount between a failed write and its retry once left the
// counts short of the maps by every such entry, and the room admitted
// too much. So a recount adds the entries that states say may exist but
// that the maps lack. Only entries whose content a state does not know
// are looked up: one it knows was written.

import (
	"github.com/lbstate/lbstate/bpf"
)

// absentMay returns, for each map, the entries that the states say may
// exist and that the map lacks.
func (o *ops) absentMay() (entries, error) {
	var e entries
	var err error
	absent := func(m roomMap, ok bool, lookupErr error) {
		if lookupErr != nil {
			err = lookupErr
		} else if !ok {
			e[m]++
		}
	}
	for _, fes := range []*addrMap{&o.frontends, &o.restoredFrontends} {
		for k, i := range fes.all() {
			st := o.feStates.at(i)
			if st.hasMaster && !st.masterWritten {
				_, ok, lerr := o.maps.Services.Lookup(bpf.NewServiceKey(k.l3n4(), 0))
				absent(roomServices, ok, lerr)
			}
			written := st.written()
			for s := bpf.InlineSlots + 1; s <= int(st.slots); s++ {
				if s <= len(written) && written[s-1] != 0 {
					continue
				}
				_, ok, lerr := o.maps.Services.Lookup(bpf.NewServiceKey(k.l3n4(), uint16(s)))
				absent(roomServices, ok, lerr)
			}
			if st.hasRevNat && !st.revNatWritten {
				_, ok, lerr := o.maps.RevNat.Lookup(st.id)
				absent(roomRevNat, ok, lerr)
			}
			if st.maglev && st.maglevKnown() == nil {
				_, ok, lerr := o.maps.Maglev.Lookup(st.id)
				absent(roomMaglev, ok, lerr)
			}
			if len(o.failing) == 0 {
				continue
			}
			if _, failing := o.failing[k.l3n4()]; failing {
				// Ranges have no known content: a frontend whose update
				// succeeded wrote them all.
				for _, r := range st.ranges() {
					r.RevNatID = st.id
					_, ok, lerr := o.maps.SourceRanges.Lookup(r)
					absent(roomSourceRanges, ok, lerr)
				}
			}
		}
	}
	backend := func(i uint32) {
		if be := o.beStates.at(i); be.inMap && !be.written {
			_, ok, lerr := o.maps.Backends.Lookup(be.id)
			absent(roomBackends, ok, lerr)
		}
	}
	for _, i := range o.backends.all() {
		backend(i)
	}
	for _, i := range o.restoredBackends.all() {
		backend(i)
	}
	return e, err
}
