package k8s

import (
	"cmp"
	"iter"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/lbstate/lbstate/internal/slab"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// serviceEntry is what the reflector holds of one service: its Service,
// if any, and its slices, if any.
type serviceEntry struct {
	// name is the entry's key (r.services is keyed by its text). Every
	// name the reflector hands the Writer for the service is this one, so
	// that the tables' rows share one string.
	name lb.ServiceName
	svc  *corev1.Service
	// The slices by name: the first inline (most services have one), the
	// others in more (behind a pointer, to keep the entry small; a new
	// list whenever they change).
	first *discoveryv1.EndpointSlice
	more  *[]*discoveryv1.EndpointSlice
}

// slices yields the service's slices, by name.
func (e *serviceEntry) slices() iter.Seq[*discoveryv1.EndpointSlice] {
	return func(yield func(*discoveryv1.EndpointSlice) bool) {
		if e.first == nil || !yield(e.first) {
			return
		}
		for _, es := range e.rest() {
			if !yield(es) {
				return
			}
		}
	}
}

// rest returns the slices after the first.
func (e *serviceEntry) rest() []*discoveryv1.EndpointSlice {
	if e.more == nil {
		return nil
	}
	return *e.more
}

// setRest keeps list as the slices after the first.
func (e *serviceEntry) setRest(list []*discoveryv1.EndpointSlice) {
	e.more = nil
	if len(list) > 0 {
		e.more = &list
	}
}

// hasSlice reports whether the service has a slice of that name.
func (e *serviceEntry) hasSlice(name string) bool {
	if e.first == nil {
		return false
	}
	if e.first.Name == name {
		return true
	}
	_, found := slices.BinarySearchFunc(e.rest(), name, byName)
	return found
}

// putSlice adds es to the service's slices, or replaces the slice of the
// same name. The list after the first is copied on change: r.services
// shares it until the batch ends.
func (e *serviceEntry) putSlice(es *discoveryv1.EndpointSlice) {
	switch {
	case e.first == nil:
		e.first = es
	case e.first.Name == es.Name:
		e.first = es
	case es.Name < e.first.Name:
		e.setRest(slices.Insert(slices.Clone(e.rest()), 0, e.first))
		e.first = es
	default:
		rest := slices.Clone(e.rest())
		if i, found := slices.BinarySearchFunc(rest, es.Name, byName); found {
			rest[i] = es
		} else {
			rest = slices.Insert(rest, i, es)
		}
		e.setRest(rest)
	}
}

// removeSlice removes the service's slice of that name, if any.
func (e *serviceEntry) removeSlice(name string) {
	rest := e.rest()
	switch {
	case e.first == nil:
	case e.first.Name == name:
		e.first = nil
		if len(rest) > 0 {
			e.first = rest[0]
			e.setRest(slices.Clone(rest[1:]))
		}
	default:
		if i, found := slices.BinarySearchFunc(rest, name, byName); found {
			e.setRest(slices.Delete(slices.Clone(rest), i, i+1))
		}
	}
}

func byName(es *discoveryv1.EndpointSlice, name string) int { return cmp.Compare(es.Name, name) }

// change is what one batch did to a service: the entry as the batch
// leaves it, and what to declare again.
type change struct {
	e serviceEntry
	// backends: its slices changed, its backends are derived again.
	backends bool
	// declare: its Service was added, changed or deleted (or the node
	// changed), it is converted again (or its declaration deleted).
	declare bool
	// What the history (tables.Cause) says caused each: the last Service
	// (or Node) event and the last EndpointSlice event of the batch.
	declaredBy, backendsBy *tables.Cause
}

// serviceNames holds the text of the services' names, which every row of
// a service keeps: four names of up to 16 bytes share one allocation.
var serviceNames slab.Slab

// batchState is what prepare keeps while it records one batch: the
// services the batch touched, each looked up once in r.services and
// written back once at the end. It is kept between batches so that its
// map and slice are not allocated again.
type batchState struct {
	index   map[lb.ServiceName]int // into changes
	changes []change
	// last is the index+1 of the change touched last (0: none): a
	// service's events come together (its Service and its slice, each
	// touching it twice), and comparing names costs less than a hash.
	last int
}

// touch returns the batch's change of a service, starting it from the
// reflector's entry on the first touch. The pointer is good until the
// next touch.
func (r *Reflector) touch(name lb.ServiceName) *change {
	b := &r.batch
	if b.last > 0 && b.changes[b.last-1].e.name == name {
		return &b.changes[b.last-1]
	}
	i, ok := b.index[name]
	if !ok {
		e, known := r.services[name.String()]
		if !known {
			e.name = name.WithTextFrom(serviceNames.String)
		}
		i = len(b.changes)
		b.index[e.name] = i
		b.changes = append(b.changes, change{e: e})
	}
	b.last = i + 1
	return &b.changes[i]
}

// endBatch writes the batch's entries back into r.services (dropping those
// that hold nothing) and returns its changes, by service name. They are
// good until the next batch starts.
func (r *Reflector) endBatch() []change {
	b := &r.batch
	b.last = 0 // (changes is sorted and emptied below)
	for i := range b.changes {
		c := &b.changes[i]
		if !c.backends && !c.declare {
			continue // only looked at
		}
		e := &c.e
		if e.svc == nil && e.first == nil {
			delete(r.services, e.name.String())
		} else {
			r.services[e.name.String()] = *e
		}
	}
	r.compactServices()
	slices.SortFunc(b.changes, func(a, b change) int { return a.e.name.Compare(b.e.name) })
	changes := b.changes
	if len(changes) > 4*r.cfg.K8sBatchSize {
		// A node change touched every service: do not keep that much.
		b.index, b.changes = map[lb.ServiceName]int{}, nil
	} else {
		clear(b.index)
		b.changes = b.changes[:0]
	}
	return changes
}

// compactServices makes r.services anew once it holds less than a
// quarter of its peak: a Go map keeps the room of its peak (a delete-all
// of 20,000 services once kept 2 MB).
func (r *Reflector) compactServices() {
	n := len(r.services)
	r.servicesPeak = max(r.servicesPeak, n)
	if r.servicesPeak < 1024 || 4*n >= r.servicesPeak {
		return
	}
	services := make(map[string]serviceEntry, n)
	for k, e := range r.services {
		services[k] = e
	}
	r.services, r.servicesPeak = services, n
}
