package bpf_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// bpf.MonotonicSeconds, which the collector, lbctl and these tests read,
// is never ahead of the clock the datapath stamps pins and expiries with,
// even just after a second's boundary.
//
// TestTCAffinityFollowsTheNewFlowSlots once failed under load ("before the
// change, a new flow went to backend 4, not 2"): the test pinned a client
// at CLOCK_MONOTONIC's second, the datapath reads the coarse clock, which
// moves on the timer tick and so lags by up to a tick, and in that lag
// after a second's boundary the pin was a second in the future, whose
// (unsigned) age reads as expired.
func TestMonotonicSecondsIsNeverAheadOfTheDatapathClock(t *testing.T) {
	h := newDatapath(t, dpConfig())
	h.backend(1, "10.1.0.1:8080/TCP", lb.BackendActive)
	h.frontend(testFrontend{addr: "10.96.0.1:80/TCP", id: 1, affinity: 60, slots: []uint32{1}})
	key := bpf.AffinityKey{Client: netip.MustParseAddr("10.0.0.5").As16(), RevNatID: 1}
	for i := range 3 {
		h.check(h.maps.Affinity.Delete(key))
		justAfterASecond(t)
		before := bpf.MonotonicSeconds()
		h.balance(flow(fmt.Sprintf("10.0.0.5:%d", 40000+i), "10.96.0.1:80", lb.ProtoTCP))
		after := bpf.MonotonicSeconds()
		v, ok, err := h.maps.Affinity.Lookup(key)
		h.check(err)
		if !ok || v.LastUsed < before || v.LastUsed > after {
			t.Fatalf("the datapath pinned the client at second %d (%v), bpf.MonotonicSeconds read %d before and %d after", v.LastUsed, ok, before, after)
		}
	}
}

// justAfterASecond returns as soon as CLOCK_MONOTONIC enters a new second:
// there the coarse clock still shows the old one until the next tick. It
// sleeps to within a few milliseconds of the boundary, then polls for it.
func justAfterASecond(t *testing.T) {
	t.Helper()
	now := func() (ts unix.Timespec) {
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
			t.Fatal(err)
		}
		return ts
	}
	start := now()
	for ts := start; ts.Sec == start.Sec; ts = now() {
		if left := time.Second - time.Duration(ts.Nsec); left > 3*time.Millisecond {
			time.Sleep(left - 2*time.Millisecond)
		}
	}
}
