package lb

import (
	"runtime"
	"slices"
	"sync"
	"weak"
)

// backendHints are the parts of BackendParams that most backends leave
// empty or share with many others: port names (the same for every
// endpoint of a slice, and few across a cluster) and topology hints.
// They are immutable once made, so that params copied from one another
// share them.
type backendHints struct {
	portNames, forZones, forNodes []string
}

// PortNames are the service port names this address serves. A backend
// with no port names serves every frontend of its protocol. The caller
// must not modify the slice; WithPortNames sets them.
func (p *BackendParams) PortNames() []string {
	if p.hints == nil {
		return nil
	}
	return p.hints.portNames
}

// ForZones are the zones whose clients should prefer this backend when
// the service asks for topology-aware routing (EndpointSlice forZones).
// The caller must not modify the slice; WithTopologyHints sets them.
func (p *BackendParams) ForZones() []string {
	if p.hints == nil {
		return nil
	}
	return p.hints.forZones
}

// ForNodes are the nodes whose clients should prefer this backend
// (EndpointSlice forNodes). The caller must not modify the slice;
// WithTopologyHints sets them.
func (p *BackendParams) ForNodes() []string {
	if p.hints == nil {
		return nil
	}
	return p.hints.forNodes
}

// WithPortNames returns a copy of p whose PortNames are names (the copy
// keeps its own copy of them, or shares an equal list with other params).
func (p BackendParams) WithPortNames(names ...string) BackendParams {
	p.hints = makeBackendHints(names, p.ForZones(), p.ForNodes())
	return p
}

// WithTopologyHints returns a copy of p whose ForZones and ForNodes are
// forZones and forNodes (the copy keeps its own copy of them, or shares
// equal lists with other params).
func (p BackendParams) WithTopologyHints(forZones, forNodes []string) BackendParams {
	p.hints = makeBackendHints(p.PortNames(), forZones, forNodes)
	return p
}

// internedHints holds the hints in use, by their lists joined, so that
// the backends of a slice, or every backend serving ports of the same
// names, share one: a backend with port names costs no allocation. An
// entry is a weak pointer, removed once no backend holds its hints, so
// the table holds what the tables hold and no more (it once kept every
// list ever seen, up to its cap, and then interned nothing new). Distinct
// lists in use are few in a cluster (port names, zones); past
// maxInternedHints, hints are made without being kept.
var internedHints struct {
	sync.Mutex
	m map[string]weak.Pointer[backendHints]
}

const maxInternedHints = 4096

// internedEntry is what a cleanup needs to remove an entry: not the hints
// themselves, which would keep them alive.
type internedEntry struct {
	key string
	wp  weak.Pointer[backendHints]
}

// makeBackendHints returns hints holding copies of the lists, nil when
// all are empty.
func makeBackendHints(portNames, forZones, forNodes []string) *backendHints {
	if len(portNames) == 0 && len(forZones) == 0 && len(forNodes) == 0 {
		return nil
	}
	var buf [128]byte
	key := buf[:0]
	for i, list := range [3][]string{portNames, forZones, forNodes} {
		if i > 0 {
			key = append(key, 0)
		}
		for _, s := range list {
			key = append(key, s...)
			key = append(key, 1)
		}
	}
	internedHints.Lock()
	defer internedHints.Unlock()
	old := internedHints.m[string(key)].Value()
	if old != nil && slices.Equal(old.portNames, portNames) && slices.Equal(old.forZones, forZones) && slices.Equal(old.forNodes, forNodes) {
		return old
	}
	h := &backendHints{slices.Clone(portNames), slices.Clone(forZones), slices.Clone(forNodes)}
	// An entry whose hints are gone is replaced; one that holds other
	// lists under the same key (names with the separators in them) stays.
	if old == nil && len(internedHints.m) < maxInternedHints {
		if internedHints.m == nil {
			internedHints.m = make(map[string]weak.Pointer[backendHints])
		}
		e := internedEntry{string(key), weak.Make(h)}
		internedHints.m[e.key] = e.wp
		runtime.AddCleanup(h, forgetHints, e)
	}
	return h
}

// forgetHints removes an entry whose hints no one holds any more, unless
// newer hints took its key.
func forgetHints(e internedEntry) {
	internedHints.Lock()
	defer internedHints.Unlock()
	if internedHints.m[e.key] == e.wp {
		delete(internedHints.m, e.key)
	}
}
