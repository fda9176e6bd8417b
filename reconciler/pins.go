package reconciler

import "slices"

// voidedPins says which of a frontend's affinity pins an update voids:
// a pin is honoured only while its backend sits in one of the new-flow
// slots 1..count (lb.h), so the pins of backends that were there before
// the update and are not after (weight 0, standby, hidden by a route or a
// redirect) would only wait for their timeout. When what the slots held
// is unknown (after a failure, or for a restored frontend), every pin of
// a backend outside the new slots goes. nil when the update voids none,
// or the frontend can have no pins. Call it before writeSlots.
func voidedPins(j *task) func(backendID uint32) bool {
	if !j.st.affinity {
		return nil
	}
	now := j.slotIDs[:len(j.slotIDs)-len(j.standby)-len(j.fallback)]
	before, count := j.st.written(), int(j.st.master.Count)
	known := j.st.masterWritten && count <= len(before)
	if known && slices.Equal(before[:count], now) {
		return nil // most updates of a frontend with affinity
	}
	in := make(map[uint32]bool, len(now))
	for _, id := range now {
		in[id] = true
	}
	if !known {
		return func(id uint32) bool { return !in[id] }
	}
	var gone map[uint32]bool
	for _, id := range before[:count] {
		if !in[id] {
			if gone == nil {
				gone = map[uint32]bool{}
			}
			gone[id] = true
		}
	}
	if gone == nil {
		return nil // the same backends, in other slots or shares
	}
	return func(id uint32) bool { return gone[id] }
}
