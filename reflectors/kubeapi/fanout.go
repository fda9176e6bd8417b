package kubeapi

import (
	"context"
	"maps"
	"slices"
	"sync"
)

// Fanout hands objects to the subscribers of their kinds, keeping the
// latest version of each, so that a subscriber that comes later (a source
// whose job started over) is handed every object first, as an informer
// does. A directory feed keeps its objects in one; an API feed its
// CRD-backed kinds'. Events are handed over under its lock, in the order
// they came.
type Fanout struct {
	mu     sync.Mutex
	objs   map[string]map[string]any // kind → key → object
	synced bool
	subs   map[*fanoutSub]struct{}
}

type fanoutSub struct {
	kinds map[string]bool
	s     Subscription
}

// NewFanout returns an empty Fanout, not synced.
func NewFanout() *Fanout {
	return &Fanout{objs: map[string]map[string]any{}, subs: map[*fanoutSub]struct{}{}}
}

// Set records that the object key of kind is obj (added or changed) and
// hands it to the kind's subscribers.
func (f *Fanout) Set(kind, key string, obj any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.objs[kind] == nil {
		f.objs[kind] = map[string]any{}
	}
	f.objs[kind][key] = obj
	for sub := range f.subs {
		if sub.kinds[kind] {
			sub.s.Events.Push(obj, false)
		}
	}
}

// Delete records that the object key of kind is gone and hands its last
// version to the kind's subscribers as deleted; if it had none (it never
// read), it hands them last, if not nil (a subscriber may hold a status
// of the object it could not read).
func (f *Fanout) Delete(kind, key string, last any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	obj, ok := f.objs[kind][key]
	if !ok {
		if obj = last; obj == nil {
			return
		}
	}
	delete(f.objs[kind], key)
	for sub := range f.subs {
		if sub.kinds[kind] {
			sub.s.Events.Push(obj, true)
		}
	}
}

// Invalid hands err, about an object of kind that cannot be read, to the
// kind's subscribers.
func (f *Fanout) Invalid(kind string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for sub := range f.subs {
		if sub.kinds[kind] && sub.s.Invalid != nil {
			sub.s.Invalid(err)
		}
	}
}

// MarkSynced says that every object of the initial state was handed over:
// every subscriber gets Synced, now or after its replay.
func (f *Fanout) MarkSynced() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.synced {
		return
	}
	f.synced = true
	for sub := range f.subs {
		sub.s.Events.Synced()
	}
}

// Subscribe hands s.Events every object of s.Kinds there is, then (if the
// Fanout is synced, else once it is) Synced, then every change until ctx
// is done.
func (f *Fanout) Subscribe(ctx context.Context, s Subscription) {
	cancel := f.subscribe(s)
	defer cancel()
	<-ctx.Done()
}

// subscribe is Subscribe without the wait; cancel ends it.
func (f *Fanout) subscribe(s Subscription) (cancel func()) {
	sub := &fanoutSub{kinds: map[string]bool{}, s: s}
	for _, k := range s.Kinds {
		sub.kinds[k.Kind] = true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// In the order of kind and key, so that a subscriber sees the same
	// sequence every time (and the reconciler gives the same IDs).
	for _, kind := range slices.Sorted(maps.Keys(sub.kinds)) {
		objs := f.objs[kind]
		for _, key := range slices.Sorted(maps.Keys(objs)) {
			s.Events.Push(objs[key], false)
		}
	}
	if f.synced {
		s.Events.Synced()
	}
	f.subs[sub] = struct{}{}
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.subs, sub)
	}
}
