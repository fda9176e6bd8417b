package bpf

import (
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// CTTimeouts are the reference datapath's conntrack timeouts (lb.h,
// lb_ct): how long a flow lives after its last packet, by its state.
// The datapath counts whole seconds.
type CTTimeouts struct {
	// SYN: a TCP flow no reply has answered yet.
	SYN time.Duration
	// TCP: an established TCP flow.
	TCP time.Duration
	// Close: a TCP flow after a FIN or RST in either direction.
	Close time.Duration
	// Other: UDP, and socket entries of any protocol but TCP.
	Other time.Duration
}

// DefaultCTTimeouts are Cilium's defaults, except Other (Cilium's is 60 s
// for non-TCP; 120 s keeps a quiet UDP exchange such as a slow DNS
// retry on its backend).
var DefaultCTTimeouts = CTTimeouts{SYN: time.Minute, TCP: 6 * time.Hour, Close: 10 * time.Second, Other: 2 * time.Minute}

// Validate says which timeout is out of range, if one is.
func (t CTTimeouts) Validate() error {
	_, err := t.constants()
	return err
}

// constants returns the programs' constants of t, checking each.
func (t CTTimeouts) constants() (map[string]uint32, error) {
	out := map[string]uint32{}
	for name, d := range map[string]time.Duration{
		"lb_ct_timeout_syn": t.SYN, "lb_ct_timeout_tcp": t.TCP, "lb_ct_timeout_close": t.Close, "lb_ct_timeout_other": t.Other,
	} {
		// Beyond 2^31 seconds, the datapath's wrap-safe comparison of
		// expiry and clock breaks.
		if d < time.Second || d > (1<<30)*time.Second {
			return nil, fmt.Errorf("conntrack timeout %s: %s is not between 1s and 2^30 s", strings.TrimPrefix(name, "lb_ct_timeout_"), d)
		}
		out[name] = uint32(d / time.Second)
	}
	return out, nil
}

// CTCollection is what one garbage collection of a conntrack map did.
type CTCollection struct {
	// Entries is how many entries the map held before, Expired how many
	// of them were deleted, MaxEntries the map's capacity.
	Entries, Expired, MaxEntries int
}

// Pressure is how full the map was before the collection: entries over
// capacity, 0 to 1.
func (c CTCollection) Pressure() float64 {
	if c.MaxEntries == 0 {
		return 0
	}
	return float64(c.Entries) / float64(c.MaxEntries)
}

// CollectConntrack deletes the expired entries of a conntrack map
// (m.Conntrack; the datapath cell leaves m.SockConntrack to its LRU) in
// one walk. An entry that the
// datapath renews between the walk and the deletion (a new flow on the
// same tuple) is looked up again and kept: only entries still expired
// then go. The clock is the datapath's (monotonic seconds): an entry is
// live through the second of its expiry and deleted after it (the
// datapath's coarse clock may lag a tick behind a second's start, when
// the entry is at the end of its life anyway).
func CollectConntrack(m *Maps, ct Map[CTKey, CTValue]) (CTCollection, error) {
	var c CTCollection
	if cp, ok := m.Capacity(ct.Name()); ok {
		c.MaxEntries = cp.MaxEntries
	}
	now := MonotonicSeconds()
	expired := func(v CTValue) bool { return int32(now-v.Expires) > 0 }
	var stale []CTKey
	err := ct.Iterate(func(k CTKey, v CTValue) bool {
		c.Entries++
		if expired(v) {
			stale = append(stale, k)
		}
		return true
	})
	if err != nil {
		return c, err
	}
	gone := stale[:0]
	for _, k := range stale {
		if v, ok, err := ct.Lookup(k); err != nil {
			return c, err
		} else if ok && expired(v) {
			gone = append(gone, k)
		}
	}
	if err := ct.BatchDelete(gone); err != nil {
		return c, err
	}
	c.Expired = len(gone)
	return c, nil
}

// MonotonicSeconds is the datapath's clock: the kernel's monotonic time
// in whole seconds, which conntrack expiries and affinity pins' last use
// are in.
func MonotonicSeconds() uint32 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return uint32(ts.Sec)
}
