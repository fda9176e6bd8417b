package reconciler

import (
	"fmt"
	"math"
)

// idAllocator hands out 32-bit IDs in increasing order, wrapping around and
// skipping IDs in use. A freed ID is therefore not handed out again until
// the whole space has been cycled through, so flows that still carry an
// old ID (in conntrack, in affinity entries) are not sent somewhere new.
type idAllocator struct {
	kind string
	next uint32
	used map[uint32]struct{}
}

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
		if _, taken := a.used[id]; !taken {
			a.used[id] = struct{}{}
			return id, nil
		}
	}
	return 0, fmt.Errorf("no free %s ID", a.kind)
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
