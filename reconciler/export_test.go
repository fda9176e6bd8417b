package reconciler

import "time"

// SetRetryMinBackoff makes the hives built from now on wait at least d
// before statedb retries a failed frontend, and returns what undoes it.
func SetRetryMinBackoff(d time.Duration) (undo func()) {
	old := retryMinBackoff
	retryMinBackoff = d
	return func() { retryMinBackoff = old }
}

// OnDroppedCheck calls f after each look at the backend IDs restore
// dropped that slots still name (checkDropped), and returns what undoes
// it.
func OnDroppedCheck(f func()) (undo func()) {
	droppedChecked = f
	return func() { droppedChecked = nil }
}

// SetPruneRetry sets the bounds of the wait before a prune, or a look at
// the backend IDs restore dropped, is tried again, and returns what
// undoes it.
func SetPruneRetry(lo, hi time.Duration) (undo func()) {
	oldLo, oldHi := pruneRetryMin, pruneRetryMax
	pruneRetryMin, pruneRetryMax = lo, hi
	return func() { pruneRetryMin, pruneRetryMax = oldLo, oldHi }
}

// OnRecount calls f each time the maps are counted again (room.recount),
// and returns what undoes it.
func OnRecount(f func()) (undo func()) {
	onRecount = f
	return func() { onRecount = nil }
}
