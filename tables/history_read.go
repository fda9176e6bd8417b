package tables

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cilium/statedb/reconciler"

	"github.com/lbstate/lbstate/lb"
)

// HistoryRecord is one entry of the journal as read: what changed in a
// frontend, why, and what the reconciler did with it.
type HistoryRecord struct {
	Seq      uint64         `json:"seq" yaml:"seq"`
	Time     time.Time      `json:"time" yaml:"time"`
	Frontend lb.L3n4Addr    `json:"frontend" yaml:"frontend"`
	Service  lb.ServiceName `json:"service" yaml:"service"`
	// Cause is Causes in one line ("unknown cause" when the Writer was
	// given none).
	Cause  string  `json:"cause" yaml:"cause"`
	Causes []Cause `json:"causes,omitempty" yaml:"causes,omitempty"`
	// Change is "created", "changed" or "deleted".
	Change string `json:"change" yaml:"change"`
	// Added and Removed are backends (address, weight, state); Changed
	// says what else changed: a backend's weight or state, the policy's
	// fields, an override set or cleared.
	Added   []string `json:"added,omitempty" yaml:"added,omitempty"`
	Removed []string `json:"removed,omitempty" yaml:"removed,omitempty"`
	Changed []string `json:"changed,omitempty" yaml:"changed,omitempty"`
	Outcome Outcome  `json:"outcome" yaml:"outcome"`
}

// HistoryQuery selects records; the zero value selects all.
type HistoryQuery struct {
	// Frontend, if valid, keeps the records of that frontend only.
	Frontend lb.L3n4Addr
	// Service, if set, keeps the records of that service's frontends.
	Service lb.ServiceName
	// Since keeps the records committed at or after it.
	Since time.Time
	// After keeps the records with a sequence number above it (a
	// watcher's last).
	After uint64
	// Limit, if above 0, keeps the newest Limit records.
	Limit int
}

// Records returns the records q selects, oldest first, and a channel
// closed at the next change of the journal.
func (h *History) Records(q HistoryQuery) ([]HistoryRecord, <-chan struct{}) {
	h.mu.Lock()
	h.indexLocked()
	var rows func(lb.L3n4Addr) (*lb.Frontend, bool)
	if h.rows != nil {
		rows = h.rows()
	}
	h.readOutcomesLocked(q, rows)
	// Newest first, up to Limit; copies, with the row after each (the
	// ring may move once unlocked).
	var picked []historyEntry
	var after []*lb.Frontend
	since := q.Since.Sub(h.start)
	for i := h.entries.len() - 1; i >= 0 && (q.Limit <= 0 || len(picked) < q.Limit); i-- {
		e := h.entries.at(i)
		if e.seq <= q.After {
			break // older ones are older still
		}
		if !q.Since.IsZero() && e.when < since || // (times are taken before the commit's lock: not in order)
			q.Frontend.IsValid() && e.addr != q.Frontend ||
			q.Service != (lb.ServiceName{}) && e.service != q.Service {
			continue
		}
		picked = append(picked, *e)
		after = append(after, h.rowAfterLocked(e, rows))
	}
	watch := h.changed
	h.mu.Unlock()
	// Built outside the lock: rows are immutable.
	out := make([]HistoryRecord, len(picked))
	for i := range picked {
		out[len(out)-1-i] = picked[i].record(after[i], h.start)
	}
	return out, watch
}

// rowAfterLocked returns the row e's change led to: nil if it deleted the
// frontend, else the row before the frontend's next change, or, for its
// newest, the row in the table now (h.mu held: with every journaled
// commit made under it, the table holds what the newest entries wrote);
// rowUnknown without a table to read.
func (h *History) rowAfterLocked(e *historyEntry, rows func(lb.L3n4Addr) (*lb.Frontend, bool)) *lb.Frontend {
	switch {
	case e.deleted:
		return nil
	case e.next != 0:
		return h.at(e.seq + uint64(e.next)).old
	case rows == nil:
		return rowUnknown
	}
	row, _ := rows(e.addr)
	return row
}

// rowUnknown stands for a row after that a journal without a table to
// read (one not made by a Writer) cannot know.
var rowUnknown = new(lb.Frontend)

func (e *historyEntry) record(after *lb.Frontend, start time.Time) HistoryRecord {
	r := HistoryRecord{Seq: e.seq, Time: start.Add(e.when).Round(0), Frontend: e.addr, Service: e.service, Outcome: e.outcome()}
	var lines []string
	for _, c := range e.causes.all() {
		lines = append(lines, c.String())
		if c != nil {
			r.Causes = append(r.Causes, *c)
		}
	}
	r.Cause = strings.Join(lines, "; ")
	if r.Cause == "" {
		r.Cause = UnknownCause
	}
	switch {
	case e.old == nil:
		r.Change = "created"
	case e.deleted:
		r.Change = "deleted"
	default:
		r.Change = "changed"
	}
	switch {
	case e.old == rowTooLarge:
		r.Changed = []string{"(the row before is not kept: larger than the journal's cap)"}
	case after == rowTooLarge:
		r.Changed = []string{"(the row after is not kept: larger than the journal's cap)"}
	case after == rowUnknown:
		r.Changed = []string{"(the row after is not known: the journal has no table to read)"}
	default:
		r.Added, r.Removed, r.Changed = FrontendDiff(e.old, after)
	}
	return r
}

// FrontendDiff says what changed from one frontend row to the next (either
// nil: created, deleted): backends added and removed, and the rest.
func FrontendDiff(old, new *lb.Frontend) (added, removed, changed []string) {
	var ob, nb []lb.BackendRef
	if old != nil {
		ob = old.Backends
	}
	if new != nil {
		nb = new.Backends
	}
	before := make(map[lb.L3n4Addr]lb.BackendRef, len(ob))
	for _, b := range ob {
		before[b.Address] = b
	}
	for _, b := range nb {
		o, ok := before[b.Address]
		if !ok {
			added = append(added, backendLine(b))
			continue
		}
		delete(before, b.Address)
		if o.Weight != b.Weight {
			changed = append(changed, fmt.Sprintf("backend %s weight %d -> %d", b.Address, o.Weight, b.Weight))
		}
		if o.State != b.State {
			changed = append(changed, fmt.Sprintf("backend %s state %s -> %s", b.Address, o.State, b.State))
		}
	}
	for _, b := range ob {
		if _, ok := before[b.Address]; ok {
			removed = append(removed, backendLine(b))
		}
	}
	if old == nil || new == nil {
		return added, removed, changed
	}
	if old.Service != new.Service {
		changed = append(changed, fmt.Sprintf("owner %s -> %s", old.Service, new.Service))
	}
	changed = append(changed, policyDiff(old.Policy, new.Policy)...)
	ox, nx := old.Extras(), new.Extras()
	changed = overrideDiff(changed, "redirect", ox.RedirectedTo.String(), nx.RedirectedTo.String(), ox.RedirectedTo == lb.ServiceName{}, nx.RedirectedTo == lb.ServiceName{})
	changed = overrideDiff(changed, "route", ox.RoutedBy, nx.RoutedBy, ox.RoutedBy == "", nx.RoutedBy == "")
	changed = overrideDiff(changed, "proxy redirect", fmt.Sprint(ox.ProxyPort), fmt.Sprint(nx.ProxyPort), ox.ProxyPort == 0, nx.ProxyPort == 0)
	if ox.Rejected != nx.Rejected {
		changed = append(changed, fmt.Sprintf("rejected weight %d -> %d", ox.Rejected, nx.Rejected))
	}
	if ox.TopologyLevel != nx.TopologyLevel {
		changed = append(changed, fmt.Sprintf("topology level %q -> %q", ox.TopologyLevel, nx.TopologyLevel))
	}
	return added, removed, changed
}

func backendLine(b lb.BackendRef) string {
	return fmt.Sprintf("%s weight %d %s", b.Address, b.Weight, b.State)
}

func overrideDiff(changed []string, what, old, new string, oldNone, newNone bool) []string {
	switch {
	case oldNone && newNone, old == new:
		return changed
	case oldNone:
		return append(changed, fmt.Sprintf("%s set: %s", what, new))
	case newNone:
		return append(changed, fmt.Sprintf("%s cleared (was %s)", what, old))
	}
	return append(changed, fmt.Sprintf("%s %s -> %s", what, old, new))
}

// policyDiff names the policy fields that differ (by their encoding,
// which is the read API's: the names an operator sees).
func policyDiff(old, new *lb.ServiceParams) []string {
	if old == new || old == nil || new == nil {
		return nil
	}
	var o, n map[string]json.RawMessage
	ob, _ := json.Marshal(old)
	nb, _ := json.Marshal(new)
	if json.Unmarshal(ob, &o) != nil || json.Unmarshal(nb, &n) != nil {
		return nil
	}
	var out []string
	for k, v := range n {
		if k == "frontends" || k == "name" {
			continue
		}
		if ov, ok := o[k]; !ok || string(ov) != string(v) {
			out = append(out, fmt.Sprintf("policy %s %s -> %s", k, orNone(o[k]), v))
		}
	}
	for k, v := range o {
		if _, ok := n[k]; !ok && k != "frontends" {
			out = append(out, fmt.Sprintf("policy %s %s -> (none)", k, v))
		}
	}
	slices.Sort(out)
	return out
}

func orNone(v json.RawMessage) string {
	if v == nil {
		return "(none)"
	}
	return string(v)
}

// readOutcomesLocked attaches the current status of the frontends q
// selects to their newest entry, if it has no outcome yet (h.mu held).
func (h *History) readOutcomesLocked(q HistoryQuery, rows func(lb.L3n4Addr) (*lb.Frontend, bool)) {
	if rows == nil {
		return
	}
	for addr, seq := range h.last {
		if q.Frontend.IsValid() && addr != q.Frontend {
			continue
		}
		e := h.at(seq)
		if e == nil || e.deleted || e.state != statePending && e.state != stateError ||
			q.Service != (lb.ServiceName{}) && e.service != q.Service {
			continue
		}
		if fe, ok := rows(addr); ok {
			if k := fe.Status.Kind; k == reconciler.StatusKindDone || k == reconciler.StatusKindError {
				h.reconciledLocked(addr, fe.Status)
			}
		}
	}
}
