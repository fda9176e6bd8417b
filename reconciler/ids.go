package reconciler

import (
	"fmt"
	"math"
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

func newIDAllocator(kind string) *idAllocator {
	return &idAllocator{kind: kind, next: 1, used: map[uint32]*idPage{}}
}

func (a *idAllocator) alloc() (uint32, error) {
	for range a.inUseN + 1 {
		id := a.next
		a.next++
		if a.next == math.MaxUint32 {
			a.next = 1
		}
		if a.inUse(id) {
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
		return id, nil
	}
	return 0, fmt.Errorf("no free %s ID", a.kind)
}

// resume continues from a mark recorded by an earlier allocator.
func (a *idAllocator) resume(mark uint32) {
	a.mark = mark
	if mark > a.next && mark < math.MaxUint32-1 {
		a.next = mark
	}
}

// reserve marks an ID (restored from the maps) as in use, and moves the
// allocator past it.
func (a *idAllocator) reserve(id uint32) {
	if !a.inUse(id) {
		a.set(id)
	}
	if id >= a.next && id < math.MaxUint32-1 {
		a.next = id + 1
	}
}

func (a *idAllocator) free(id uint32) {
	if !a.inUse(id) {
		return
	}
	p := a.used[id/idPageBits]
	p.words[id%idPageBits/64] &^= 1 << (id % 64)
	a.inUseN--
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
