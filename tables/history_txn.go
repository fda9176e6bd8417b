package tables

import (
	"math"
	"time"

	"github.com/cilium/statedb"
)

// journalTxn is a write transaction from Writer.WriteTxn: it carries the
// cause of the calls under way (SetCause) and the history entries staged
// by them, which reach the History when, and only if, it commits.
type journalTxn struct {
	statedb.WriteTxn
	h      *History
	cause  *Cause
	staged []historyEntry
}

// Commit commits the transaction and appends its entries, under the
// journal's lock so that entries are in the order of their commits.
func (t *journalTxn) Commit() statedb.ReadTxn {
	if len(t.staged) == 0 {
		// The buffer it was given goes back too: committed without an
		// Abort after, it was dropped.
		t.h.putSpare(t.staged)
		t.staged = nil
		return t.WriteTxn.Commit()
	}
	var rtxn statedb.ReadTxn
	t.h.commit(t.staged, func() { rtxn = t.WriteTxn.Commit() })
	t.h.putSpare(t.staged)
	t.staged = nil
	return rtxn
}

// commit runs commit (the table transaction's) and appends staged, under
// the lock so that entries are in the order of their commits.
func (h *History) commit(staged []historyEntry, commit func()) {
	for i := range staged { // outside the lock
		staged[i].size = int32(min(entrySize(&staged[i]), math.MaxInt32))
	}
	// The time is taken before the commit: a reconciler that reads the
	// rows as soon as they are committed writes a later status.
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	commit()
	h.appendLocked(staged, now)
}

// Abort drops the transaction and its entries.
func (t *journalTxn) Abort() {
	t.h.putSpare(t.staged)
	t.staged = nil
	t.WriteTxn.Abort()
}

// maxSpare bounds the staging buffer kept for the next transaction, in
// entries (120 KiB): a larger one (a node change that touched every
// frontend) is left to the collector.
const maxSpare = 1024

// takeSpare returns the staging buffer a finished transaction left, or
// nil.
func (h *History) takeSpare() []historyEntry {
	h.spareMu.Lock()
	defer h.spareMu.Unlock()
	s := h.spare
	h.spare = nil
	return s
}

// putSpare keeps staged, emptied, for the next transaction: staging
// appended into a fresh slice in every transaction, doubling it as it
// went (at 50,000 services, 350 bytes of garbage per service, the
// Writer's largest allocation).
func (h *History) putSpare(staged []historyEntry) {
	if cap(staged) == 0 || cap(staged) > maxSpare {
		return
	}
	clear(staged) // the rows and causes are the ring's to keep, not the buffer's
	h.spareMu.Lock()
	defer h.spareMu.Unlock()
	h.spare = staged[:0]
}

// stage records a frontend row change (old nil: created). A frontend
// changed twice in one transaction (Writer calls outside a Batch each
// refresh) gets one entry: from the row before the first, deleted if
// the last deleted it, with the causes of both. Only the last few
// entries are looked at: one service's frontends are staged together.
func (ch *changes) stage(e historyEntry) {
	jt := ch.jt
	if jt == nil {
		return
	}
	for i := len(jt.staged) - 1; i >= max(0, len(jt.staged)-8); i-- {
		if p := &jt.staged[i]; p.addr == e.addr {
			p.deleted = e.deleted
			p.service = e.service
			p.causes.join(e.causes)
			return
		}
	}
	jt.staged = append(jt.staged, e)
}

// journal points ch at txn's journal and the cause of the call under way.
func (ch *changes) journal(txn statedb.WriteTxn) {
	if jt, ok := txn.(*journalTxn); ok {
		ch.jt, ch.cause = jt, jt.cause
	}
}
