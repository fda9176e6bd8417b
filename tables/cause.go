package tables

import (
	"strings"

	"github.com/cilium/statedb"
)

// Cause says which object of which source a Writer call is applying, so
// that the history (History) of the frontends it changes answers "who
// said so": for example
//
//	&tables.Cause{Source: "k8s", Kind: "EndpointSlice", Name: "shop/web-abc", Version: "resourceVersion 4711"}
//	&tables.Cause{Source: "health", Name: "10.0.2.1:8080", Detail: "breaker tripped"}
//
// A Cause is immutable once given to the Writer: entries share it.
type Cause struct {
	Source  string `json:"source" yaml:"source"`                       // the source's name ("k8s", "health", "kvstore", ...)
	Kind    string `json:"kind,omitempty" yaml:"kind,omitempty"`       // the object's kind ("Service", "EndpointSlice", "HTTPRoute")
	Name    string `json:"name,omitempty" yaml:"name,omitempty"`       // namespace/name, an address, a cluster
	Version string `json:"version,omitempty" yaml:"version,omitempty"` // "resourceVersion 4711", "generation 3", "revision 12"
	Detail  string `json:"detail,omitempty" yaml:"detail,omitempty"`   // free text: "breaker tripped", "stale", "deleted"
}

// UnknownCause is what entries of Writer calls made without a cause say.
const UnknownCause = "unknown cause"

func (c *Cause) String() string {
	if c == nil {
		return UnknownCause
	}
	var b strings.Builder
	for _, s := range []string{c.Source, c.Kind, c.Name, c.Version} {
		if s == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(s)
	}
	if c.Detail != "" {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(c.Detail)
	}
	return b.String()
}

// size is what a cause costs the history's memory cap (charged once per
// entry: shared causes are over-counted, which errs on the safe side).
func (c *Cause) size() int {
	if c == nil {
		return 0
	}
	return 80 + len(c.Source) + len(c.Kind) + len(c.Name) + len(c.Version) + len(c.Detail)
}

// SetCause says that the Writer calls with txn that follow, until the
// next SetCause, apply cause (nil: unknown). It is a property of the
// transaction, not of the Writer: two sources writing in turn never see
// each other's. txn must come from WriteTxn; in a transaction of the
// caller's own (db.WriteTxn over Tables()) the Writer keeps no history,
// and SetCause does nothing.
func (w *Writer) SetCause(txn statedb.WriteTxn, cause *Cause) {
	if jt, ok := txn.(*journalTxn); ok {
		jt.cause = cause
	}
}

// BatchFor is Batch with every call inside fn caused by cause (fn may
// change it per object with SetCause).
func (w *Writer) BatchFor(txn statedb.WriteTxn, cause *Cause, fn func() error) error {
	w.SetCause(txn, cause)
	return w.Batch(txn, fn)
}

// causeSet is the causes of one service's change in a call or batch:
// nearly always one.
type causeSet struct {
	first *Cause
	more  []*Cause
}

func (s *causeSet) add(c *Cause) {
	if c == s.first || s.first == nil && len(s.more) == 0 {
		s.first = c
		return
	}
	for _, m := range s.more {
		if m == c {
			return
		}
	}
	s.more = append(s.more, c)
}

func (s *causeSet) join(o causeSet) {
	if o.first != nil {
		s.add(o.first)
	}
	for _, c := range o.more {
		s.add(c)
	}
}

func (s causeSet) list() []*Cause {
	if s.first == nil && len(s.more) == 0 {
		return nil
	}
	return append([]*Cause{s.first}, s.more...)
}
