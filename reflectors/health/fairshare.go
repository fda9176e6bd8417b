package health

import (
	"slices"

	"github.com/lbstate/lbstate/lb"
)

// The probe slots (--health-max-concurrent) are shared between services:
// a service whose backends never answer would otherwise hold every slot
// for its probes' timeouts, and no other backend would be probed. Each
// target is charged to one service, its owner (the service whose check
// it follows). A service always may hold its share of the slots,
// share(): 1/(N+1) of them with N services, at least one. It may take
// more only while a share's worth stays free after it, so that the
// others (and a service that shows up later) always find their share
// free without waiting for anyone's timeout, while slots nobody needs
// are used. A due target that may not start is parked until slots free.

// serviceSlots is one service's probes under way, and its due targets
// waiting for one of them to end.
type serviceSlots struct {
	owner    lb.ServiceName
	inflight int
	parked   []*target
	// waiting is its index in runState.waiting while it has parked
	// targets.
	waiting int
}

// share is how many probes one service may have under way.
func (r *runState) share(slots int) int {
	return max(1, slots/(len(r.owners)+1))
}

// setOwner charges t to owner (or to nobody, with the zero name).
func (r *runState) setOwner(t *target, owner lb.ServiceName) {
	if t.owner == owner {
		return
	}
	if t.owner != (lb.ServiceName{}) {
		if r.owners[t.owner]--; r.owners[t.owner] <= 0 {
			delete(r.owners, t.owner)
		}
	}
	t.owner = owner
	if owner != (lb.ServiceName{}) {
		r.owners[owner]++
	}
}

// slotsOf returns the slots of t's owner.
func (r *runState) slotsOf(t *target) *serviceSlots {
	s := r.slots[t.owner]
	if s == nil {
		s = &serviceSlots{owner: t.owner}
		r.slots[t.owner] = s
	}
	return s
}

// mayStart says whether a probe of s may start with busy slots of limit
// under way.
func (s *serviceSlots) mayStart(share, busy, limit int) bool {
	return s.inflight < share || limit-busy-1 >= share
}

// park sets t, due, aside until its service may start a probe.
func (r *runState) park(t *target, s *serviceSlots) {
	t.parked, t.slot = true, s
	if len(s.parked) == 0 {
		s.waiting = len(r.waiting)
		r.waiting = append(r.waiting, s)
	}
	s.parked = append(s.parked, t)
	r.parkedN++
}

// unpark takes t out of its service's parked targets, back to the queue
// when requeue is set (its due time has passed, so it comes first).
func (r *runState) unpark(t *target, requeue bool) {
	s := t.slot
	s.parked = slices.DeleteFunc(s.parked, func(p *target) bool { return p == t })
	t.parked, t.slot = false, nil
	r.parkedN--
	if len(s.parked) == 0 { // out of r.waiting: the last takes its place
		last := r.waiting[len(r.waiting)-1]
		r.waiting[s.waiting], last.waiting = last, s.waiting
		r.waiting[len(r.waiting)-1] = nil
		r.waiting = r.waiting[:len(r.waiting)-1]
	}
	if requeue {
		r.queue.put(t)
	}
	r.release(s)
}

// release forgets s once it holds nothing.
func (r *runState) release(s *serviceSlots) {
	if s.inflight == 0 && len(s.parked) == 0 && r.slots[s.owner] == s {
		delete(r.slots, s.owner)
	}
}

// unparkWithin requeues the parked targets that may now start (a probe
// ended, or a service went and the shares grew): up to each service's
// share, and the slots beyond a share's worth that are free. Dispatch
// parks again what it then cannot start. It looks only at the services
// with parked targets: ranging over every service with a probe under
// way on each wake-up was 6% of the prober's CPU at 10,000 probes a
// second, and more while it caught up. Backwards, as unpark moves the
// last service, already seen, into the place of one it empties.
func (r *runState) unparkWithin(share, free int) {
	spare := free - share
	for i := len(r.waiting) - 1; i >= 0; i-- {
		s := r.waiting[i]
		for n := share - s.inflight; len(s.parked) > 0 && (n > 0 || spare > 0); n-- {
			if n <= 0 {
				spare--
			}
			r.unpark(s.parked[0], true)
		}
	}
}
