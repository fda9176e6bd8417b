package reconciler

import "github.com/lbstate/lbstate/bpf"

// markRestoredSlotsUsed tells lb_rev_nat and lb_backends that readers
// may hold every ID restore reserved: flows and other maps carry them,
// and a slot that reads empty may still be one a reader will look at
// (lb_rev_nat recreated while lb_services kept its masters' IDs). Each
// such ID's slot then takes an ID in two writes, fields then ID, never in
// the one write a never-used slot gets (bpf/slotted.go). IDs restore saw
// but did not reserve (a slot naming a backend lb_backends lost) stay
// below the allocator's mark, handed out again only after a wrap.
func (o *ops) markRestoredSlotsUsed() error {
	if err := bpf.MarkSlotsUsed(o.maps.RevNat, o.feIDs.all()); err != nil {
		return err
	}
	return bpf.MarkSlotsUsed(o.maps.Backends, o.beIDs.all())
}
