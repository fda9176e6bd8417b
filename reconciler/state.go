package reconciler

import (
	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/internal/smallset"
	"github.com/lbstate/lbstate/lb/maglev"
)

// frontendState is what may be in the maps for one frontend, and what is
// known to be there, so that an update writes only what changed. It lives
// in ops.feStates (arena.go). What most frontends have one of (a backend,
// a slot) is kept inline; more, and what few have, is behind more.
type frontendState struct {
	// (Fields ordered so that the struct packs into 48 bytes.)
	more *frontendMore // nil for most
	// Known contents, nil or zero when unknown (after a failure, or for a
	// restored frontend): master is slot 0 (beside its rev-NAT ID, id),
	// if masterWritten.
	master bpf.ServiceMaster
	id     uint32
	// written is the known backend IDs of slots 1..nWritten: written1
	// holds slot 1's when nWritten is 1, more.written them all when it is
	// higher.
	nWritten uint32
	written1 [1]uint32
	// backend1 is, until more.backends takes over, the arena index of the one
	// backend whose ID this frontend's entries may name, or 0 for none.
	// The backends are those whose IDs its entries may name: while an
	// update is under way, the old and the new; they are released only
	// once nothing names them.
	backend1 [1]uint32
	// slots 1..slots may exist: a slot number is 16 bits in the map's key
	// (maxSlots).
	slots uint16

	masterWritten, revNatWritten bool // lb_services slot 0, lb_rev_nat entry
	// hasMaster says that a master entry may exist (the frontend may be in
	// service), hasRevNat a rev-NAT entry; they count in room.go.
	hasMaster, hasRevNat bool
	maglev               bool // a Maglev table may exist
	affinity             bool // affinity entries may exist
}

// frontendMore is the part of a frontend's state that most frontends,
// with one backend, one slot and no source ranges, do without.
type frontendMore struct {
	// backends replaces backend1 once a second backend comes (manyBackends).
	backends     smallset.Set[uint32]
	manyBackends bool
	written      []uint32 // when nWritten > 1
	// ranges are the lb_src_range entries that may exist.
	ranges      smallset.Set[bpf.SourceRangeKey]
	maglevKnown *maglevContent // known: what the Maglev table holds
}

// maglevContent is what a frontend's Maglev table was computed from.
type maglevContent struct {
	input []maglev.Backend
	ids   map[addrKey]uint32 // the IDs it names
}

func (st *frontendState) extra() *frontendMore {
	if st.more == nil {
		st.more = &frontendMore{}
	}
	return st.more
}

// backends returns the arena indexes of the frontend's backends. (Do not
// keep it across a change of them.)
func (st *frontendState) backends() []uint32 {
	switch {
	case st.more != nil && st.more.manyBackends:
		return st.more.backends.Items()
	case st.backend1[0] != 0:
		return st.backend1[:]
	}
	return nil
}

// backendCount is len(st.backends()), without copying.
func (st *frontendState) backendCount() int {
	switch {
	case st.more != nil && st.more.manyBackends:
		return st.more.backends.Len()
	case st.backend1[0] != 0:
		return 1
	}
	return 0
}

// addBackend adds backend i and reports whether it was not there yet.
func (st *frontendState) addBackend(i uint32) bool {
	switch {
	case st.more != nil && st.more.manyBackends:
		return st.more.backends.Add(i)
	case st.backend1[0] == i:
		return false
	case st.backend1[0] == 0:
		st.backend1[0] = i
		return true
	}
	more := st.extra()
	more.backends.Add(st.backend1[0])
	more.backends.Add(i)
	more.manyBackends, st.backend1[0] = true, 0
	return true
}

// reserveBackends makes room for n backends in all (with no allocation
// per backend added).
func (st *frontendState) reserveBackends(n int) {
	more := st.extra()
	if !more.manyBackends {
		more.manyBackends = true
		if st.backend1[0] != 0 {
			more.backends.Add(st.backend1[0])
			st.backend1[0] = 0
		}
	}
	more.backends.Grow(n - more.backends.Len())
}

// removeBackend removes backend i, if it is there.
func (st *frontendState) removeBackend(i uint32) {
	if st.more != nil && st.more.manyBackends {
		st.more.backends.Remove(i)
	} else if st.backend1[0] == i {
		st.backend1[0] = 0
	}
}

// written returns the known backend IDs of slots 1..n.
func (st *frontendState) written() []uint32 {
	if st.nWritten > 1 {
		return st.more.written[:st.nWritten]
	}
	return st.written1[:st.nWritten]
}

// setWritten records ids as the known backend IDs of slots 1..len(ids);
// it keeps ids, which must not change.
func (st *frontendState) setWritten(ids []uint32) {
	st.nWritten = uint32(len(ids))
	if len(ids) > 1 {
		st.extra().written = ids
		return
	}
	copy(st.written1[:], ids)
	if st.more != nil {
		st.more.written = nil
	}
}

// truncateWritten forgets the known IDs of slots past n.
func (st *frontendState) truncateWritten(n int) {
	if int(st.nWritten) > n {
		st.setWritten(st.written()[:n])
	}
}

func (st *frontendState) maglevKnown() *maglevContent {
	if st.more == nil {
		return nil
	}
	return st.more.maglevKnown
}

func (st *frontendState) setMaglevKnown(c *maglevContent) {
	if c != nil || st.more != nil {
		st.extra().maglevKnown = c
	}
}

// addRange records that the frontend's lb_src_range entry k may exist.
func (st *frontendState) addRange(k bpf.SourceRangeKey) {
	st.extra().ranges.Add(k)
}

// hasRange reports whether the frontend's lb_src_range entry k may exist.
func (st *frontendState) hasRange(k bpf.SourceRangeKey) bool {
	return st.more != nil && st.more.ranges.Has(k)
}

// ranges returns the lb_src_range entries that may exist.
func (st *frontendState) ranges() []bpf.SourceRangeKey {
	if st.more == nil {
		return nil
	}
	return st.more.ranges.Items()
}

// backendState is what the reconciler knows of one backend. It lives in
// ops.beStates (arena.go).
type backendState struct {
	// (Fields ordered so that the struct packs into 56 bytes, without a
	// pointer: the collector need not look into the arena.)
	key  addrKey
	id   uint32
	born uint32 // the ops call that created it
	refs int32  // frontends whose backends include this one
	// The frontends' views of the backend; the lb_backends value is
	// derived from all of them (backendValue). The first is kept inline
	// (its frontend 0 for none: IDs start at 1), as most backends serve
	// one frontend; ops.moreViews holds the others, if manyViews.
	first backendView
	value beValue // what lb_backends holds, if written
	// written says that value is in lb_backends, inMap that an entry may
	// exist.
	written, inMap bool
	manyViews      bool
}
