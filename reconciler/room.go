package reconciler

// Room in the maps. A frontend that does not fit must not hold entries
// that others could use, nor be left half-written, so the reconciler
// decides before writing whether a frontend fits: it counts the entries it
// may have put in each map it fills, and admit refuses a frontend that
// needs more than is free. Who gets the room when not every frontend fits
// is decided by frontend ID, oldest first (waiting.go).
//
// The counts are upper bounds of what the reconciler wrote: an entry is
// counted from just before it is written until it is known to be
// deleted, so a failed write leaves it counted. After a failure the
// counts are marked stale, and the maps are counted again (by iterating
// them) before a frontend is refused on their word. Someone else may
// write the maps too: a map-full error from the kernel, which means the
// counts were too low, has them counted again at once; and since entries
// someone else deletes leave them too high, a frontend is refused on
// counts older than recountAfter only after counting again.

import (
	"fmt"
	"math"
	"time"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// roomMap names a map whose room the reconciler accounts for.
type roomMap uint8

const (
	roomServices roomMap = iota
	roomBackends
	roomRevNat
	roomMaglev
	roomSourceRanges
	numRoomMaps
)

// entries is a number of entries in each map.
type entries [numRoomMaps]int

func (e *entries) add(o entries) {
	for m := range e {
		e[m] += o[m]
	}
}

func (e *entries) sub(o entries) {
	for m := range e {
		e[m] -= o[m]
	}
}

// fitsIn returns the first map in which e needs more than free has, and
// false if there is none.
func (e entries) fitsIn(free entries) (roomMap, bool) {
	for m := range e {
		if e[m] > 0 && e[m] > free[m] {
			return roomMap(m), false
		}
	}
	return 0, true
}

// mapRoom is one map's capacity and use.
type mapRoom struct {
	name     string
	flag     string // the capacity flag, with its dashes
	capacity int
	used     int
	count    func() (int, error) // counts the entries by iterating

	// full counts the frontends refused, or failed, for want of room in
	// this map; lastLog and unlogged rate-limit the log line saying so.
	full     int
	lastLog  time.Time
	unlogged int
}

// room is the accounting of every map the reconciler fills.
type room struct {
	maps [numRoomMaps]mapRoom
	// stale is set when a map operation failed: the counts may be too
	// high until the maps are counted again.
	stale bool
	// freed is set when an entry is deleted; waiting frontends are then
	// offered the room (offerRoom).
	freed bool
	// reserved is the room held for waiting frontends that fit
	// (waiting.go), summed.
	reserved entries
	// counted is when the maps were last counted, and took how long
	// that took (recountDue).
	counted time.Time
	took    time.Duration
	// absent returns the entries that states say may exist and the maps
	// lack (room_absent.go): a recount counts them as held.
	absent func() (entries, error)
}

// recountEvery is the least time between two counts that nothing but
// their age asks for; they are also at least 10 times as far apart as a
// count takes, so that counting costs at most a tenth of the time.
const recountEvery = time.Second

// recountDue reports whether the counts are old enough to be counted
// again before refusing a frontend on their word: entries someone else
// deleted since may have made room.
func (r *room) recountDue(now time.Time) bool {
	return now.Sub(r.counted) >= max(recountEvery, 10*r.took)
}

func newRoom(maps *bpf.Maps) room {
	var r room
	set := func(m roomMap, name string, count func() (int, error)) {
		mr := mapRoom{name: name, capacity: math.MaxInt, count: count}
		if c, ok := maps.Capacity(name); ok {
			mr.capacity, mr.flag = c.MaxEntries, c.Flag
		}
		r.maps[m] = mr
	}
	set(roomServices, maps.Services.Name(), func() (int, error) { return bpf.Count(maps.Services) })
	set(roomBackends, maps.Backends.Name(), func() (int, error) { return bpf.Count(maps.Backends) })
	set(roomRevNat, maps.RevNat.Name(), func() (int, error) { return bpf.Count(maps.RevNat) })
	set(roomMaglev, maps.Maglev.Name(), func() (int, error) {
		n := 0
		err := maps.Maglev.Iterate(func(uint32, []uint32) bool { n++; return true })
		return n, err
	})
	set(roomSourceRanges, maps.SourceRanges.Name(), func() (int, error) { return bpf.Count(maps.SourceRanges) })
	return r
}

// recount counts the entries of every map again, and those that states
// may still write (absent). On error the counts stay as they were, and
// stale.
func (r *room) recount() error {
	if onRecount != nil {
		onRecount()
	}
	start := time.Now()
	var counted entries
	for m := range r.maps {
		n, err := r.maps[m].count()
		if err != nil {
			r.stale = true
			return err
		}
		counted[m] = n
	}
	if r.absent != nil {
		absent, err := r.absent()
		if err != nil {
			r.stale = true
			return err
		}
		counted.add(absent)
	}
	r.set(counted, start)
	return nil
}

// onRecount is called at each recount, for tests.
var onRecount func()

// set takes counted as the counts, counted since start.
func (r *room) set(counted entries, start time.Time) {
	for m := range r.maps {
		if counted[m] < r.maps[m].used {
			r.freed = true
		}
		r.maps[m].used = counted[m]
	}
	r.stale = false
	r.counted, r.took = time.Now(), time.Since(start)
}

// free returns the room left in each map, reservations not subtracted.
func (r *room) free() entries {
	var f entries
	for m := range r.maps {
		f[m] = r.maps[m].capacity - r.maps[m].used
	}
	return f
}

// use counts delta more entries in map m.
func (o *ops) use(m roomMap, delta int) {
	o.room.maps[m].used += delta
	if delta < 0 {
		o.room.freed = true
	}
}

// setSlots and setMay (and use, for source ranges) are the only writers of
// the state that says what may be in the maps, so that the counts follow
// it.

// setSlots counts the entries of slots 1..n: those past the inline ones
// (bpf.SlotEntries).
func (o *ops) setSlots(st *frontendState, n int) {
	o.use(roomServices, bpf.SlotEntries(n)-bpf.SlotEntries(int(st.slots)))
	st.slots = uint16(n)
}

// setMay sets flag, which says whether an entry of map m may exist,
// counting the change.
func (o *ops) setMay(m roomMap, flag *bool, may bool) {
	if *flag != may {
		*flag = may
		o.use(m, delta(may))
	}
}

func delta(added bool) int {
	if added {
		return 1
	}
	return -1
}

// need returns the entries the task's frontend needs beyond those it has:
// backends (selected or hidden) not in lb_backends (nor in counted, those an older frontend of
// the batch brings), and what needOwn counts.
func (o *ops) need(j *task, counted map[lb.L3n4Addr]bool) entries {
	n := needOwn(j)
	var seen map[lb.L3n4Addr]bool // a backend both hidden and selected counts once
	if len(j.fe.Hidden()) > 0 {
		seen = map[lb.L3n4Addr]bool{}
	}
	for _, b := range kept(j.fe) {
		if seen != nil {
			if seen[b.Address] {
				continue
			}
			seen[b.Address] = true
		}
		k := keyOf(b.Address)
		var be *backendState
		if j.st != nil {
			_, be = o.heldBackend(j.st, k)
		}
		if be == nil {
			be = o.knownBackend(k)
		}
		if (be == nil || !be.inMap) && !counted[b.Address] {
			n[roomBackends]++
		}
	}
	return n
}

// needOwn returns the entries of its own the task's frontend needs beyond
// those it has: slots and a master entry, a rev-NAT entry, a Maglev table,
// source ranges. Unlike backends, which others may write, they depend on
// the frontend alone, and cost no lookup.
func needOwn(j *task) entries {
	var n entries
	st := j.st
	n[roomServices] = max(0, bpf.SlotEntries(j.slotCount)-bpf.SlotEntries(int(st.slots)))
	if !st.hasMaster {
		n[roomServices]++
	}
	if !st.hasRevNat {
		n[roomRevNat] = 1
	}
	if j.useMaglev && !st.maglev {
		n[roomMaglev] = 1
	}
	for k := range j.ranges {
		if !st.hasRange(k) {
			n[roomSourceRanges]++
		}
	}
	return n
}

// knownBackend returns the state of a backend that is, or may be, in
// lb_backends, or nil.
func (o *ops) knownBackend(k addrKey) *backendState {
	if i, ok := o.backends.get(k); ok {
		return o.beStates.at(i)
	}
	if i, ok := o.restoredBackends.get(k); ok {
		return o.beStates.at(i)
	}
	return nil
}

// noRoom is the error of a frontend that needs n entries of map m where
// only free are left.
func (o *ops) noRoom(j *task, m roomMap, n, free int) error {
	r := &o.room.maps[m]
	raise := ""
	if r.flag != "" {
		raise = "; raise " + r.flag
	}
	if n > r.capacity {
		raise = ", more than the whole map holds" + raise
	}
	return fmt.Errorf("frontend %s: no room in %s: needs %d more entries, %d of %d free for it (frontends with lower IDs come first)%s: %w",
		j.fe.Address, r.name, n, max(free, 0), r.capacity, raise, bpf.ErrMapFull)
}
