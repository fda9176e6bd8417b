package lb

import (
	"slices"
	"sync"
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

// internedHints holds the hints made so far, by their lists joined, so
// that the backends of a slice, or every backend serving ports of the
// same names, share one: a backend with port names costs no allocation.
// Distinct lists are few in a cluster (port names, zones); past
// maxInternedHints, hints are made without being kept.
var internedHints struct {
	sync.Mutex
	m map[string]*backendHints
}

const maxInternedHints = 4096

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
	h, ok := internedHints.m[string(key)]
	if ok && slices.Equal(h.portNames, portNames) && slices.Equal(h.forZones, forZones) && slices.Equal(h.forNodes, forNodes) {
		return h
	}
	h = &backendHints{slices.Clone(portNames), slices.Clone(forZones), slices.Clone(forNodes)}
	if !ok && len(internedHints.m) < maxInternedHints { // ok: names with the separators in them
		if internedHints.m == nil {
			internedHints.m = make(map[string]*backendHints)
		}
		internedHints.m[string(key)] = h
	}
	return h
}
