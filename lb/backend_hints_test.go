package lb

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

func internedHintsLen() int {
	internedHints.Lock()
	defer internedHints.Unlock()
	return len(internedHints.m)
}

// waitInternedHints runs the collector until the interning table holds at
// most want entries (cleanups run after a collection, on their own
// goroutine), failing after a deadline.
func waitInternedHints(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for internedHintsLen() > want {
		if time.Now().After(deadline) {
			t.Fatalf("interning table holds %d entries after its hints were dropped, want <= %d", internedHintsLen(), want)
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}

// Hints no backend holds any more leave the interning table, and lists
// seen later are interned again: the table once kept every list ever made
// up to its cap, so an agent that had seen 4096 distinct lists (zones and
// port names churned over days) shared no new list again.
func TestInternedHintsAreEvictedWhenUnused(t *testing.T) {
	base := internedHintsLen()
	for i := range maxInternedHints + 100 {
		_ = makeBackendHints([]string{fmt.Sprintf("churn-%d", i)}, nil, nil)
	}
	waitInternedHints(t, base)

	keep := BackendParams{}.WithPortNames("after-churn")
	again := BackendParams{}.WithPortNames("after-churn")
	if keep.hints != again.hints {
		t.Fatalf("equal port names after churn are not shared: %p and %p", keep.hints, again.hints)
	}
	// A list in use stays interned across collections.
	runtime.GC()
	runtime.GC()
	if later := (BackendParams{}).WithPortNames("after-churn"); later.hints != keep.hints {
		t.Errorf("hints in use were evicted: %p, want %p", later.hints, keep.hints)
	}
	runtime.KeepAlive(keep.hints)
}
