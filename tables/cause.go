package tables

import (
	"slices"
	"strings"
	"unsafe"

	"github.com/cilium/statedb"
)

// Cause says which object of which source a Writer call is applying, so
// that the history (History) of the frontends it changes answers "who
// said so": for example
//
//	&tables.Cause{Source: "k8s", Kind: "EndpointSlice", Namespace: "shop", Name: "web-abc", ResourceVersion: "4711"}
//	&tables.Cause{Source: "health", Name: "10.0.2.1:8080", Detail: "breaker tripped"}
//
// A Cause is immutable once given to the Writer: entries share it.
//
// A Kubernetes object's namespace and resourceVersion have fields of their
// own, so that a source makes one allocation per cause, not one per
// field it would otherwise concatenate ("shop/web-abc", "resourceVersion
// 4711"): a cause is made for every object event, and the history keeps
// it as long as its entries.
type Cause struct {
	Source          string `json:"source" yaml:"source"`                                       // the source's name ("k8s", "health", "kvstore", ...)
	Kind            string `json:"kind,omitempty" yaml:"kind,omitempty"`                       // the object's kind ("Service", "EndpointSlice", "HTTPRoute")
	Namespace       string `json:"namespace,omitempty" yaml:"namespace,omitempty"`             // the object's namespace, if it has one
	Name            string `json:"name,omitempty" yaml:"name,omitempty"`                       // its name, an address, a cluster
	ResourceVersion string `json:"resourceVersion,omitempty" yaml:"resourceVersion,omitempty"` // a Kubernetes object's, as the API server gave it
	Version         string `json:"version,omitempty" yaml:"version,omitempty"`                 // other versions or places: "generation 3", "revision 12", "at FILE:LINE"
	Detail          string `json:"detail,omitempty" yaml:"detail,omitempty"`                   // free text: "breaker tripped", "stale", "deleted"
}

// UnknownCause is what entries of Writer calls made without a cause say.
const UnknownCause = "unknown cause"

func (c *Cause) String() string {
	if c == nil {
		return UnknownCause
	}
	var b strings.Builder
	word := func(s ...string) {
		if s[len(s)-1] == "" {
			return
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		for _, p := range s {
			b.WriteString(p)
		}
	}
	word(c.Source)
	word(c.Kind)
	if c.Namespace != "" && c.Name != "" {
		word(c.Namespace, "/", c.Name)
	} else {
		word(c.Namespace + c.Name)
	}
	word("resourceVersion ", c.ResourceVersion)
	word(c.Version)
	word(c.Detail)
	return b.String()
}

// size is what a cause costs the history's memory cap (charged once per
// entry: shared causes are over-counted, which errs on the safe side).
func (c *Cause) size() int {
	if c == nil {
		return 0
	}
	return int(unsafe.Sizeof(*c)) + len(c.Namespace) + len(c.Name) + len(c.ResourceVersion) + len(c.Version) + len(c.Detail)
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
	// first, second and more are the causes in the order given, nil
	// slots empty (an unknown cause among others is noCause). A service
	// created in one batch with its endpoints has two: no slice then.
	// more is behind a pointer, a new list whenever it grows: the journal
	// keeps a set in every entry, and a third cause is rare.
	first, second *Cause
	more          *[]*Cause
}

// rest returns the causes after the first two.
func (s *causeSet) rest() []*Cause {
	if s.more == nil {
		return nil
	}
	return *s.more
}

// noCause stands for an unknown cause in a set that has others.
var noCause = new(Cause)

func (s *causeSet) add(c *Cause) {
	switch {
	case s.first == nil:
		s.first = c // nil: still empty, an unknown cause alone
		return
	case c == nil:
		c = noCause
	}
	switch {
	case c == s.first || c == s.second:
	case s.second == nil:
		s.second = c
	case !slices.Contains(s.rest(), c):
		// A new list: sets copied from one share it, and an append into
		// its spare room would show in the others.
		more := append(slices.Clip(s.rest()), c)
		s.more = &more
	}
}

func (s *causeSet) join(o causeSet) {
	// Not through all(): its list would be an allocation per join.
	if o.first == nil {
		return
	}
	s.add(known(o.first))
	if o.second != nil {
		s.add(known(o.second))
	}
	for _, c := range o.rest() {
		s.add(known(c))
	}
}

// known is c as add takes it: nil for an unknown cause.
func known(c *Cause) *Cause {
	if c == noCause {
		return nil
	}
	return c
}

// all returns the causes, nil for an unknown one; none if the only cause
// is unknown.
func (s causeSet) all() []*Cause {
	if s.first == nil {
		return nil
	}
	list := []*Cause{s.first}
	if s.second != nil {
		list = append(list, s.second)
	}
	list = append(list, s.rest()...)
	for i, c := range list {
		if c == noCause {
			list[i] = nil
		}
	}
	return list
}
