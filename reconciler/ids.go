package reconciler

import (
	"fmt"
	"iter"
	"math"
	"math/bits"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/internal/sparse"
)

// idAllocator hands out 32-bit IDs in increasing order, wrapping around and
// skipping IDs in use. A freed ID is therefore not handed out again until
// the whole space has been cycled through, so flows that still carry an
// old ID (in conntrack, in affinity entries) are not sent somewhere new.
//
// To keep that promise across restarts, the allocator reserves IDs in
// blocks: before handing out an ID at or above its mark it records a mark
// idBlock higher (persist), and a restarted allocator starts at the
// recorded mark.
//
// IDs key dense ID maps (lb_rev_nat for frontends, lb_backends for
// backends; see bpf/slotted.go): ID id lives in slot id % slots, so the
// allocator also skips an ID whose slot another live ID holds, and fails
// with a map-full error when every slot is held.
//
// The IDs in use are a bitmap in pages of idPageBits IDs, a page only
// where some ID is in use: IDs are handed out in order, so they cluster,
// and a page costs 8 KiB where a map would cost about 40 bytes an ID.
type idAllocator struct {
	kind    string
	next    uint32
	used    map[uint32]*idPage // by id / idPageBits
	inUseN  int
	mark    uint32
	persist func(mark uint32) error

	// slotMap and slots are the dense ID map the IDs key and its
	// max_entries; owner is the live ID holding each slot (sparse: the
	// default lb_backends has a million slots), and ownedN how many do.
	// An ID in use need not hold a slot: one restored from another map
	// (reserve) may share a slot with one that does, until it is
	// released.
	slotMap string
	slots   uint32
	owner   *sparse.Array[uint32]
	ownedN  int
}

const idPageBits = 1 << 16

// idPage is the bitmap of one page of IDs, and how many are set.
type idPage struct {
	words [idPageBits / 64]uint64
	n     int
}

// idBlock is how many IDs one recorded mark reserves: a mark is written
// (one map update) once per idBlock IDs handed out, and a restart skips at
// most idBlock IDs.
const idBlock = 1024

// newIDAllocator returns an allocator of IDs for slotMap, a dense ID map
// of slots entries.
func newIDAllocator(kind, slotMap string, slots uint32) *idAllocator {
	return &idAllocator{
		kind: kind, next: 1, used: map[uint32]*idPage{},
		slotMap: slotMap, slots: max(slots, 1), owner: sparse.New[uint32](max(slots, 1)),
	}
}

func (a *idAllocator) alloc() (uint32, error) {
	if a.ownedN >= int(a.slots) {
		return 0, &bpf.MapFullError{Map: a.slotMap, Op: "allocate " + a.kind + " ID", MaxEntries: int(a.slots)}
	}
	// Any slots consecutive IDs cover every slot; the wrap from
	// MaxUint32-1 to 1 breaks the sequence once, and each ID in use
	// without a slot of its own costs a step more.
	for range a.inUseN - a.ownedN + 2*int(a.slots) + 2 {
		id := a.next
		a.next++
		if a.next == math.MaxUint32 {
			a.next = 1
		}
		if a.inUse(id) || a.owner.IsSet(a.slot(id)) {
			continue
		}
		if id >= a.mark && a.persist != nil {
			mark := uint32(min(uint64(id)+idBlock, math.MaxUint32-1))
			if err := a.persist(mark); err != nil {
				return 0, fmt.Errorf("%s ID: recording the ID mark: %w", a.kind, err)
			}
			a.mark = mark
		}
		a.set(id)
		a.own(id)
		return id, nil
	}
	return 0, fmt.Errorf("no free %s ID", a.kind)
}

func (a *idAllocator) slot(id uint32) uint32 { return id % a.slots }

// slotFree reports whether id may hold its slot: no other ID does.
func (a *idAllocator) slotFree(id uint32) bool {
	o := a.owner.Get(a.slot(id))
	return o == 0 || o == id
}

// own gives id its slot, which must be free.
func (a *idAllocator) own(id uint32) {
	a.owner.Set(a.slot(id), id)
	a.ownedN++
}

// resume continues from a mark recorded by an earlier allocator.
func (a *idAllocator) resume(mark uint32) {
	a.mark = mark
	if mark > a.next && mark < math.MaxUint32-1 {
		a.next = mark
	}
}

// reserve marks an ID (restored from the maps) as in use, and moves the
// allocator past it. It reports whether the ID holds its slot: false if
// another live ID holds it (the ID was written under another
// max_entries), and then the ID must not be written to the slotted map.
func (a *idAllocator) reserve(id uint32) bool {
	if !a.inUse(id) {
		a.set(id)
	}
	if id >= a.next && id < math.MaxUint32-1 {
		a.next = id + 1
	}
	switch a.owner.Get(a.slot(id)) {
	case id:
		return true
	case 0:
		a.own(id)
		return true
	}
	return false
}

func (a *idAllocator) free(id uint32) {
	if !a.inUse(id) {
		return
	}
	p := a.used[id/idPageBits]
	p.words[id%idPageBits/64] &^= 1 << (id % 64)
	a.inUseN--
	if a.owner.Get(a.slot(id)) == id {
		a.owner.Clear(a.slot(id))
		a.ownedN--
	}
	if p.n--; p.n == 0 {
		delete(a.used, id/idPageBits)
	}
}

func (a *idAllocator) inUse(id uint32) bool {
	p := a.used[id/idPageBits]
	return p != nil && p.words[id%idPageBits/64]&(1<<(id%64)) != 0
}

// set marks a free ID as in use.
func (a *idAllocator) set(id uint32) {
	p := a.used[id/idPageBits]
	if p == nil {
		p = &idPage{}
		a.used[id/idPageBits] = p
	}
	p.words[id%idPageBits/64] |= 1 << (id % 64)
	p.n++
	a.inUseN++
}

// all yields the IDs in use, in no particular order.
func (a *idAllocator) all() iter.Seq[uint32] {
	return func(yield func(uint32) bool) {
		for base, p := range a.used {
			for w, word := range p.words {
				for ; word != 0; word &= word - 1 {
					if !yield(base*idPageBits + uint32(w*64+bits.TrailingZeros64(word))) {
						return
					}
				}
			}
		}
	}
}
