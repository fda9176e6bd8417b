package bpf

import (
	"errors"
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
	// Marked is how many markers the collection wrote: clients of flows
	// with two entries whose key held nothing (see CollectConntrack).
	Marked int
	// Ports is how many client ports it told the datapaths loaded over
	// the map of (ctports.go).
	Ports int
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
// one walk. An entry that the datapath renews after the walk (a new flow
// on the same tuple) stays: each is deleted in one step with the read of
// what it held, and written back if that was live (DeleteStale). The clock is the datapath's (monotonic seconds): an entry is
// live through the second of its expiry and deleted after it (the
// datapath's coarse clock may lag a tick behind a second's start, when
// the entry is at the end of its life anyway).
//
// A flow with two entries keeps its client's key held (lb.h): the
// datapath looks for such a flow only when that key holds an entry. So
// an expired entry under a client's key stays while a live flow of that
// client has two entries, and a client whose key holds nothing gets a
// marker there (a dead entry that matches no packet): the pairs of an
// older datapath, which had no such entries, or a key the LRU took.
// LoadDatapath writes the markers (MarkConntrack) before it returns, so
// that flows of a pinned lb_ct that an older datapath wrote keep their
// backends. It also tells the datapaths this process loaded over ct the
// client ports of its flows (ctports.go).
func CollectConntrack(m *Maps, ct Map[CTKey, CTValue]) (CTCollection, error) {
	return collectConntrack(m, ct, true)
}

// MarkConntrack is CollectConntrack without the deletions: it writes the
// markers of clients whose flows with two entries have nothing under
// their key.
func MarkConntrack(m *Maps, ct Map[CTKey, CTValue]) (CTCollection, error) {
	return collectConntrack(m, ct, false)
}

// collectConntrack is CollectConntrack (remove) or MarkConntrack. Both
// set the client ports of the flows in ct in the arrays of the datapaths
// loaded over it, if any (ctports.go).
func collectConntrack(m *Maps, ct Map[CTKey, CTValue], remove bool) (CTCollection, error) {
	var c CTCollection
	ports := heldCTPortsOf(ct)
	defer ports.release()
	if cp, ok := m.Capacity(ct.Name()); ok {
		c.MaxEntries = cp.MaxEntries
	}
	now := MonotonicSeconds()
	expired := func(v CTValue) bool { return int32(now-v.Expires) > 0 }
	var stale []CTKey
	held, paired := map[CTKey]bool{}, map[CTKey]bool{}
	// walked holds the expired entries under clients' keys as the walk
	// found them: a two-entry flow that began since relies on the entry
	// there, which the datapath then wrote anew (a marker of that
	// second), so only one unchanged since goes.
	walked := map[CTKey]CTValue{}
	var clientPorts, pairPorts [1 << 16]bool
	err := ct.Iterate(func(k CTKey, v CTValue) bool {
		c.Entries++
		switch k.Kind {
		case CTClient:
			clientPorts[portOf(k.SPort)] = true
		case CTPacket:
			p := portOf(ctClientOf(k, v).SPort)
			clientPorts[p], pairPorts[p] = true, true
		}
		switch {
		case k.Kind == CTClient:
			held[k] = true
		case k.Kind == CTPacket && !expired(v):
			paired[ctClientOf(k, v)] = true
		}
		if expired(v) {
			stale = append(stale, k)
			if k.Kind == CTClient {
				walked[k] = v
			}
		}
		return true
	})
	if err != nil {
		return c, err
	}
	if !remove {
		stale = nil
	}
	gone := stale[:0]
	for _, k := range stale {
		if !paired[k] { // else it holds the key of a client with two-entry flows
			gone = append(gone, k)
		}
	}
	n, err := DeleteStale(ct, gone, func(k CTKey, v CTValue) bool {
		w, client := walked[k]
		return expired(v) && (!client || v == w)
	})
	c.Expired = n
	if err != nil {
		return c, err
	}
	if ports != nil {
		n, err := ports.set(&clientPorts, &pairPorts)
		c.Ports = n
		if err != nil {
			return c, err
		}
	}
	for k := range paired {
		if held[k] {
			continue
		}
		marked, err := CreateEntry(ct, k, CTValue{Dir: CTFlow, Expires: now - 1})
		if err != nil {
			return c, err
		}
		if marked {
			c.Marked++
		}
	}
	return c, nil
}

// ctClientOf is the key of the client of entry k, v of a flow with two
// entries: a forward entry's source, a reply entry's destination.
func ctClientOf(k CTKey, v CTValue) CTKey {
	if v.Dir == CTReply {
		return CTKey{Src: k.Dst, SPort: k.DPort, Proto: k.Proto, Kind: CTClient}
	}
	return CTKey{Src: k.Src, SPort: k.SPort, Proto: k.Proto, Kind: CTClient}
}

// ErrExists is what a create-only write returns for a key the map holds.
var ErrExists = errors.New("key exists")

// MonotonicSeconds is the datapath's clock: the kernel's coarse monotonic
// time in whole seconds, which conntrack expiries and affinity pins' last
// use are in. It must be the coarse clock, as the datapath's
// (bpf_ktime_get_coarse_ns): CLOCK_MONOTONIC runs up to a timer tick
// ahead of it, so just after a second's boundary it reads a second the
// datapath has not reached, and a pin stamped with it reads as expired.
func MonotonicSeconds() uint32 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC_COARSE, &ts); err != nil {
		return 0
	}
	return uint32(ts.Sec)
}
