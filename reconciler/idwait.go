package reconciler

// Frontends waiting for an ID. A frontend ID holds a slot of lb_rev_nat
// (a dense ID map: ID id lives in slot id % max_entries, ids.go), so a
// full lb_rev_nat shows first as a frontend that gets no ID. Such a
// frontend has no ID to be ordered by among the waiting (waiting.go), so
// these wait in the order they came, which is the order IDs are handed
// out in anyway; otherwise they are accounted like every full map: the
// refusal is counted and logged (lbstate_map_full_total{map="lb_rev_nat"}),
// and when IDs are freed their slots are reserved for the oldest waiting,
// which are retried at once, before a newer frontend takes them.

import (
	"fmt"
	"slices"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// idWaiter is a frontend waiting for an ID.
type idWaiter struct {
	addr     lb.L3n4Addr
	reserved bool // a slot is held for it
	kicked   bool // its retry was asked for since it last failed
}

// mayTakeID says whether the frontend at addr may be given a new ID: a
// slot is free that is not held for an older waiting frontend, or one is
// held for it. It returns the error of a frontend that may not.
func (o *ops) mayTakeID(addr lb.L3n4Addr) error {
	if w := o.idWaiting[addr]; w != nil && w.reserved {
		w.reserved = false
		o.idReserved--
		return nil
	}
	if o.freeIDSlots()-o.idReserved > 0 {
		return nil
	}
	r := &o.room.maps[roomRevNat]
	raise := ""
	if r.flag != "" {
		raise = "; raise " + r.flag
	}
	return fmt.Errorf("frontend %s: no room in %s for a frontend ID: its %d slots are held (frontends seen first come first)%s: %w",
		addr, r.name, o.feIDs.slots, raise, &bpf.MapFullError{Map: r.name, Op: "allocate frontend ID", MaxEntries: int(o.feIDs.slots)})
}

// freeIDSlots is how many slots of lb_rev_nat no frontend ID holds.
func (o *ops) freeIDSlots() int { return int(o.feIDs.slots) - o.feIDs.ownedN }

// startIDWaiting records a frontend that got no ID, and reports whether
// it was not waiting already (for an ID or for room).
func (o *ops) startIDWaiting(addr lb.L3n4Addr) (fresh bool) {
	if w := o.idWaiting[addr]; w != nil {
		w.kicked = false
		return false
	}
	fresh = o.waiting[addr] == nil
	w := &idWaiter{addr: addr}
	o.idWaiting[addr] = w
	o.idWaitOrder = append(o.idWaitOrder, w)
	return fresh
}

// stopIDWaiting forgets a frontend waiting for an ID (it got one, or is
// gone). A slot held for it and not used is offered again.
func (o *ops) stopIDWaiting(addr lb.L3n4Addr) {
	w := o.idWaiting[addr]
	if w == nil {
		return
	}
	if w.reserved {
		o.idReserved--
		o.room.freed = true
	}
	delete(o.idWaiting, addr)
	o.idWaitOrder = slices.DeleteFunc(o.idWaitOrder, func(x *idWaiter) bool { return x == w })
}

// offerIDs holds the free slots of lb_rev_nat for the oldest frontends
// waiting for an ID, and has them retried.
func (o *ops) offerIDs() {
	free := o.freeIDSlots() - o.idReserved
	var kick []lb.L3n4Addr
	for _, w := range o.idWaitOrder {
		if free <= 0 {
			break
		}
		if w.reserved {
			continue
		}
		w.reserved = true
		o.idReserved++
		free--
		if !w.kicked {
			w.kicked = true
			kick = append(kick, w.addr)
		}
	}
	if len(kick) > 0 && o.kick != nil {
		o.kick(kick)
	}
}
