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
type idAllocator struct {
	kind    string
	next    uint32
	used    map[uint32]struct{}
	mark    uint32
	persist func(mark uint32) error
}

// idBlock is how many IDs one recorded mark reserves: a mark is written
// (one map update) once per idBlock IDs handed out, and a restart skips at
// most idBlock IDs.
const idBlock = 1024

func newIDAllocator(kind string) *idAllocator {
	return &idAllocator{kind: kind, next: 1, used: map[uint32]struct{}{}}
}

func (a *idAllocator) alloc() (uint32, error) {
	for range len(a.used) + 1 {
		id := a.next
		a.next++
		if a.next == math.MaxUint32 {
			a.next = 1
		}
		if _, taken := a.used[id]; taken {
			continue
		}
		if id >= a.mark && a.persist != nil {
			mark := uint32(min(uint64(id)+idBlock, math.MaxUint32-1))
			if err := a.persist(mark); err != nil {
				return 0, fmt.Errorf("%s ID: recording the ID mark: %w", a.kind, err)
			}
			a.mark = mark
		}
		a.used[id] = struct{}{}
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
	a.used[id] = struct{}{}
	if id >= a.next && id < math.MaxUint32-1 {
		a.next = id + 1
	}
}

func (a *idAllocator) free(id uint32) { delete(a.used, id) }

func (a *idAllocator) inUse(id uint32) bool {
	_, ok := a.used[id]
	return ok
}
