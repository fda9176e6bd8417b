package reconciler

import "github.com/lbstate/lbstate/internal/sparse"

// idIndex maps backend IDs to arena indexes at restore, by their slot in
// lb_backends (id % slots), in a sparse array: the IDs are dense there,
// and at 100,000 services x 10 backends the Go maps of a million IDs it
// replaces cost a second of CPU. Two IDs that share a slot (one written
// under another max_entries) are rare: the second goes to a map beside.
type idIndex struct {
	slots  uint32
	bySlot *sparse.Array[idEntry]
	more   map[uint32]uint32
}

type idEntry struct{ id, i uint32 }

func newIDIndex(slots uint32) *idIndex {
	slots = max(slots, 1)
	return &idIndex{slots: slots, bySlot: sparse.New[idEntry](slots)}
}

func (x *idIndex) set(id, i uint32) {
	s := id % x.slots
	if e := x.bySlot.Get(s); x.bySlot.IsSet(s) && e.id != id {
		if x.more == nil {
			x.more = map[uint32]uint32{}
		}
		x.more[id] = i
		return
	}
	x.bySlot.Set(s, idEntry{id, i})
}

func (x *idIndex) get(id uint32) (uint32, bool) {
	s := id % x.slots
	if e := x.bySlot.Get(s); x.bySlot.IsSet(s) && e.id == id {
		return e.i, true
	}
	i, ok := x.more[id]
	return i, ok
}

func (x *idIndex) has(id uint32) bool {
	_, ok := x.get(id)
	return ok
}

func (x *idIndex) del(id uint32) {
	s := id % x.slots
	if e := x.bySlot.Get(s); x.bySlot.IsSet(s) && e.id == id {
		x.bySlot.Clear(s)
		return
	}
	delete(x.more, id)
}

func (x *idIndex) len() int { return x.bySlot.Len() + len(x.more) }

// restoredSlots are the backend slots restore read, grouped by the arena
// index of their frontend's state (a counting sort of one slice), rather
// than a slice per frontend in a map: a million map accesses and
// appends were most of the cost of reading lb_services.
type restoredSlots struct {
	read  []pendingSlot // as read, until group
	slots []restoredSlot
	start []uint32 // frontend i's slots are slots[start[i]:start[i+1]]
	gone  []bool   // by arena index: the frontend's slots are forgotten
}

type pendingSlot struct {
	fe uint32
	s  restoredSlot
}

func (r *restoredSlots) add(fe uint32, s restoredSlot) {
	r.read = append(r.read, pendingSlot{fe, s})
}

// group sorts what add added by frontend; n is past the highest index.
func (r *restoredSlots) group(n uint32) {
	r.start = make([]uint32, n+1)
	for _, p := range r.read {
		r.start[p.fe+1]++
	}
	for i := 1; i < len(r.start); i++ {
		r.start[i] += r.start[i-1]
	}
	r.slots = make([]restoredSlot, len(r.read))
	next := make([]uint32, n)
	copy(next, r.start)
	for _, p := range r.read {
		r.slots[next[p.fe]] = p.s
		next[p.fe]++
	}
	r.read = nil
	r.gone = make([]bool, n)
}

// of returns frontend i's slots.
func (r *restoredSlots) of(i uint32) []restoredSlot {
	if int(i) >= len(r.gone) || r.gone[i] {
		return nil
	}
	return r.slots[r.start[i]:r.start[i+1]]
}

// forget forgets frontend i's slots (its state is released).
func (r *restoredSlots) forget(i uint32) {
	if int(i) < len(r.gone) {
		r.gone[i] = true
	}
}

// all yields the frontends with slots, by arena index.
func (r *restoredSlots) all(yield func(uint32, []restoredSlot) bool) {
	for i := range uint32(len(r.gone)) {
		if s := r.of(i); len(s) > 0 && !yield(i, s) {
			return
		}
	}
}
