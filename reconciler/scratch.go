package reconciler

import "github.com/lbstate/lbstate/bpf"

// scratch is where the keys and values of a batch's map operations are
// built: kept from one batch to the next, they are allocated once rather
// than grown anew for every batch (a few hundred bytes of garbage per
// frontend otherwise).
type scratch struct {
	keys     []bpf.ServiceKey
	values   []bpf.ServiceValue
	ids      []uint32
	backends []bpf.Backend
	revNats  []bpf.RevNatValue
	claimed  []uint32 // arena indexes (task.claimed)
	keyed    []hashedKey
	tasks    []task
	// These hold pointers: clearAll them before giving them back.
	touched []*backendState
	pending []pendingBackend
	doomed  []doomedBackend
	arenaIs []uint32
}

// maxScratch bounds the slices kept, so that one large batch does not
// hold its memory for good.
const maxScratch = 1 << 16

// take returns the slice kept in *p, emptied, and leaves nil in its
// place, so that a nested use of the same slice builds its own.
func take[T any](p *[]T) []T {
	s := (*p)[:0]
	*p = nil
	return s
}

// giveBack keeps s for the next take. (The slices of map keys and values
// hold no pointers, runBatch clears its tasks, and the slices of pointers
// are cleared (clearAll), so what s held keeps nothing alive.)
func giveBack[T any](p *[]T, s []T) {
	if cap(s) <= maxScratch {
		*p = s[:0]
	}
}

// clearAll zeroes s up to its length and returns it.
func clearAll[T any](s []T) []T {
	clear(s)
	return s
}
