package tables

import (
	"sync"
	"time"
	"unsafe"

	"github.com/lbstate/lbstate/lb"
)

// History is the journal of frontend changes: per change the Writer made
// to a frontend row, when it was committed, what caused it (Cause), the
// row before it (what changed is computed when read, against the row
// before the frontend's next change, or the row in the table for its
// newest), and what the reconciler did with it. It is an in-memory ring
// of entries held by value, bounded by bytes, the oldest leaving first.
//
// Why only the row before: the row a change wrote is replaced at once by
// the reconciler's status write-back, so keeping it kept a second copy
// of every row alive (and one more object for the collector to mark)
// for what the next entry's row before, or the table, says anyway.
//
// Entries are staged in the write transaction (WriteTxn's) and appended
// when it commits, under the ring's lock: a commit publishes the table
// change and its entries together, an abort drops both. Why not a StateDB
// table: an insert into one per frontend change cost the Writer more than
// the 3% of its insert rate the journal may take; staging is an append
// to a slice.
type History struct {
	mu      sync.Mutex
	max     int // bytes; 0: keep nothing
	bytes   int
	entries entryRing
	nextSeq uint64
	evicted uint64
	// last is, per frontend address, the sequence number of its newest
	// entry, so that the reconciler's outcome finds it. It is brought up
	// to date (indexLocked) when read, not on every commit: a map update
	// per change was most of the journal's cost to the Writer. indexed
	// is the last sequence number it has seen.
	last    map[lb.L3n4Addr]uint64
	indexed uint64
	// changed is closed and replaced on every append (watchers).
	changed chan struct{}
	// rows returns a reader of frontends' rows as they are now (nil:
	// none), for the status (the outcome of its newest entry) and the
	// row after its newest change when records are read. Called with mu
	// held: every journaled commit is made under mu, so the table then
	// holds what the journal's newest entries wrote.
	rows func() func(lb.L3n4Addr) (*lb.Frontend, bool)
	// spare is a staging buffer a finished transaction gave back
	// (putSpare), emptied, for the next one; its own lock, so that a
	// Writer starting a transaction never waits for a reader of the
	// journal.
	spareMu sync.Mutex
	spare   []historyEntry
	// start is when the journal was made, with the monotonic clock's
	// reading: entries' times are offsets from it, so that latencies
	// are monotonic (a clock stepped back loses no outcome).
	start time.Time
}

// historyEntry is one change, as staged and kept: by value in the ring,
// so packed (120 B for one IPv4 or IPv6 frontend; the ring is most of
// the journal's memory): the fields in an order that leaves no padding,
// the rare third cause and error behind pointers.
type historyEntry struct {
	seq  uint64
	when time.Duration // the commit, since the journal's start
	addr lb.L3n4Addr   // 22 bytes: state and deleted fill its word
	// The reconciler's outcome (filled in under mu): its state, the
	// error, and the time from the commit until the maps had it (done)
	// or until the reconciler failed (error).
	state   outcomeState
	deleted bool
	service lb.ServiceName
	causes  causeSet
	// old is the row before; nil: created; rowTooLarge: not kept, over
	// the journal's cap by itself.
	old     *lb.Frontend
	err     *string // nil: none
	latency time.Duration
	// next is how many entries later the frontend's next change is (0:
	// none yet), set when the journal is indexed (indexLocked): the row
	// after this change is that entry's old.
	next uint32
	size int32
}

// outcomeState is an Outcome's State in an entry.
type outcomeState uint8

const (
	statePending outcomeState = iota
	stateDone
	stateError
	stateSuperseded
)

func (e *historyEntry) outcome() Outcome {
	o := Outcome{State: [...]string{OutcomePending, OutcomeDone, OutcomeError, OutcomeSuperseded}[e.state], Latency: e.latency}
	if e.err != nil {
		o.Error = *e.err
	}
	if e.state == statePending && e.deleted {
		o.State = OutcomeRemoved
	}
	return o
}

// rowTooLarge stands for a row the journal did not keep: with it, the
// entry was larger than the journal's cap.
var rowTooLarge = new(lb.Frontend)

// empty reports an entry that changed nothing: created and deleted in
// one transaction.
func (e *historyEntry) empty() bool { return e.old == nil && e.deleted }

// Outcome is what the reconciler did with a change.
type Outcome struct {
	// State is "pending" (not yet reconciled), "done", "error" (failing,
	// retried: Error says why), or "superseded" (a later change came
	// before the reconciler wrote this one).
	State string `json:"state" yaml:"state"`
	Error string `json:"error,omitempty" yaml:"error,omitempty"`
	// Latency is the time from the commit until the maps had it (done),
	// or until the reconciler failed (error).
	Latency time.Duration `json:"latency,omitempty" yaml:"latency,omitempty"`
}

// DefaultHistoryMaxBytes is the journal's default memory cap: ~11,000
// created one-backend frontends or ~8,000 changes of their backends,
// ~4,500 of ten-backend ones. 16 MiB before: at 50,000 services that
// was 347 bytes of every service's heap, 8% of the pipeline's, and on a
// small node many times the pipeline's own (docs/history.md).
const DefaultHistoryMaxBytes = 4 << 20

// NewHistory returns a journal that keeps at most maxBytes (estimated;
// 0 keeps nothing).
func NewHistory(maxBytes int) *History {
	return &History{max: maxBytes, last: map[lb.L3n4Addr]uint64{}, changed: make(chan struct{}), nextSeq: 1, start: time.Now()}
}

// Enabled reports whether the journal keeps anything.
func (h *History) Enabled() bool { return h != nil && h.max > 0 }

// entrySize estimates what an entry keeps alive: itself, its causes and
// the row before with its backend lists.
func entrySize(e *historyEntry) int {
	n := int(unsafe.Sizeof(*e)) + e.causes.first.size() + e.causes.second.size()
	for _, c := range e.causes.rest() {
		n += 8 + c.size()
	}
	if f := e.old; f != nil && f != rowTooLarge {
		n += int(unsafe.Sizeof(*f)) + 48*(len(f.Backends)+len(f.Hidden()))
	}
	return n
}

// appendLocked adds staged entries (h.mu held), evicting the oldest
// beyond the cap.
func (h *History) appendLocked(staged []historyEntry, when time.Time) {
	for i := range staged {
		e := &staged[i]
		if e.empty() {
			continue
		}
		e.when = when.Sub(h.start)
		if int(e.size) > h.max && e.old != nil {
			// Kept without its row, so that the change before it does
			// not take the row after this one for its own.
			e.old = rowTooLarge
			e.size = int32(entrySize(e))
		}
		if int(e.size) > h.max {
			h.evicted++
			continue
		}
		e.seq = h.nextSeq // (only kept ones: the ring's are consecutive)
		h.nextSeq++
		for h.bytes+int(e.size) > h.max {
			h.evictLocked()
		}
		h.entries.push(e)
		h.bytes += int(e.size)
	}
	h.notifyLocked()
}

// indexLocked brings last up to date with the entries appended since it
// last ran (h.mu held), and marks an entry superseded when a later one
// of its frontend came before any outcome: the reconciler writes only
// the newest row. Outcomes are attached only after it ran, so marking
// late marks what marking at once would have.
func (h *History) indexLocked() {
	if h.entries.len() > 0 {
		for seq := max(h.indexed+1, h.entries.at(0).seq); seq < h.nextSeq; seq++ {
			e := h.at(seq)
			if prev := h.at(h.last[e.addr]); prev != nil {
				prev.next = uint32(seq - prev.seq)
				if prev.state == statePending && !prev.deleted {
					prev.state = stateSuperseded
				}
			}
			h.last[e.addr] = seq
		}
	}
	h.indexed = h.nextSeq - 1
	if len(h.last) > 2*h.entries.len()+64 { // frontends whose entries all left
		for addr, seq := range h.last {
			if h.at(seq) == nil {
				delete(h.last, addr)
			}
		}
	}
}

func (h *History) notifyLocked() {
	close(h.changed)
	h.changed = make(chan struct{})
}

func (h *History) evictLocked() {
	h.bytes -= int(h.entries.pop())
	h.evicted++
}

// at returns the entry with sequence number seq, if it is still kept
// (h.mu held; the pointer is good until the ring next changes).
func (h *History) at(seq uint64) *historyEntry {
	n := h.entries.len()
	if n == 0 {
		return nil
	}
	first := h.entries.at(0).seq
	if seq < first || seq >= first+uint64(n) {
		return nil
	}
	return h.entries.at(int(seq - first))
}

// Stats are the journal's counters.
type HistoryStats struct {
	Entries  int    `json:"entries" yaml:"entries"`
	Bytes    int    `json:"bytes" yaml:"bytes"`
	MaxBytes int    `json:"maxBytes" yaml:"maxBytes"`
	Evicted  uint64 `json:"evicted" yaml:"evicted"`
}

// Stats returns the journal's counters.
func (h *History) Stats() HistoryStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return HistoryStats{Entries: h.entries.len(), Bytes: h.bytes, MaxBytes: h.max, Evicted: h.evicted}
}
