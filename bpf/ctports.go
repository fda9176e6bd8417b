package bpf

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
)

// ctPorts are the arrays of the client ports of lb_ct's flows (c/ct.h):
// lb_dp_ct_ports (every flow's client) and lb_dp_ct_pair_ports (the
// clients of flows with two entries). The programs set a port as they
// record a flow; the agent sets those of the flows in lb_ct when it loads
// the programs and at each collection (a flow an older datapath opened
// meanwhile). Nobody clears one: a port set too many costs a lookup, one
// missing would cost a flow its replies' translation.
//
// They are not pinned, but every datapath of this process loaded over
// one lb_ct shares them (ctPortsOf): a datapath reloaded without a gap,
// the new one attached before the old one is closed, or two side by side
// on different devices, see each other's flows at once, where arrays of
// each datapath's own would miss the flows the other opens until the
// next collection, and their replies on ingress with them.
type ctPorts struct {
	ct             *ebpf.Map // the lb_ct they describe, their key in ctPortsOf
	clients, pairs *ebpf.Map
	refs           int // the datapaths holding them, and collections running; under ctPortsMu

	mu sync.Mutex // set's
	// known are the ports this process set, so that a collection writes
	// only new ones.
	knownClients, knownPairs map[uint16]bool
}

const (
	ctPortsMap     = "lb_dp_ct_ports"
	ctPairPortsMap = "lb_dp_ct_pair_ports"
)

var (
	ctPortsMu sync.Mutex
	ctPortsOf = map[*ebpf.Map]*ctPorts{}
	// datapathLoads serializes the loads of datapaths, so that two
	// loaded at once over one lb_ct share its arrays too.
	datapathLoads sync.Mutex
)

// holdCTPorts returns the arrays of the datapaths loaded over ct, held
// until release, or nil if there are none.
func holdCTPorts(ct *ebpf.Map) *ctPorts {
	ctPortsMu.Lock()
	defer ctPortsMu.Unlock()
	p := ctPortsOf[ct]
	if p != nil {
		p.refs++
	}
	return p
}

// newCTPorts keeps the arrays of a collection loaded over ct, for the
// datapaths loaded over it after (holdCTPorts), held until release.
func newCTPorts(ct *ebpf.Map, maps map[string]*ebpf.Map) (*ctPorts, error) {
	p := &ctPorts{ct: ct, refs: 1, knownClients: map[uint16]bool{}, knownPairs: map[uint16]bool{}}
	for name, dst := range map[string]**ebpf.Map{ctPortsMap: &p.clients, ctPairPortsMap: &p.pairs} {
		m := maps[name]
		if m == nil {
			p.closeMaps()
			return nil, fmt.Errorf("the programs have no map %s", name)
		}
		c, err := m.Clone()
		if err != nil {
			p.closeMaps()
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		*dst = c
	}
	ctPortsMu.Lock()
	defer ctPortsMu.Unlock()
	if ct != nil && ctPortsOf[ct] == nil {
		ctPortsOf[ct] = p
	}
	return p, nil
}

// set marks the ports true in clients and pairs, returning how many it
// wrote.
func (p *ctPorts) set(clients, pairs *[1 << 16]bool) (int, error) {
	if p == nil {
		return 0, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, a := range []struct {
		m     *ebpf.Map
		ports *[1 << 16]bool
		known map[uint16]bool
	}{{p.clients, clients, p.knownClients}, {p.pairs, pairs, p.knownPairs}} {
		var keys, values []uint32
		for port, used := range a.ports {
			if used && !a.known[uint16(port)] {
				keys, values = append(keys, uint32(port)), append(values, 1)
			}
		}
		if len(keys) == 0 {
			continue
		}
		if _, err := a.m.BatchUpdate(keys, values, nil); err != nil {
			return n, fmt.Errorf("%s: %w", a.m.String(), err)
		}
		for _, k := range keys {
			a.known[uint16(k)] = true
		}
		n += len(keys)
	}
	return n, nil
}

// release lets go of p; the last holder closes the arrays.
func (p *ctPorts) release() error {
	if p == nil {
		return nil
	}
	ctPortsMu.Lock()
	p.refs--
	last := p.refs == 0
	if last && ctPortsOf[p.ct] == p {
		delete(ctPortsOf, p.ct)
	}
	ctPortsMu.Unlock()
	if !last {
		return nil
	}
	return p.closeMaps()
}

func (p *ctPorts) closeMaps() error {
	var errs []error
	for _, m := range []*ebpf.Map{p.clients, p.pairs} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	p.clients, p.pairs = nil, nil
	return errors.Join(errs...)
}

// heldCTPortsOf returns the arrays of the datapaths loaded over ct if it
// is a kernel map and there are any, held until release.
func heldCTPortsOf(ct Map[CTKey, CTValue]) *ctPorts {
	km, ok := ct.(interface{ ebpfMap() *ebpf.Map })
	if !ok || km.ebpfMap() == nil {
		return nil
	}
	return holdCTPorts(km.ebpfMap())
}

// portOf is a port in network order as a number.
func portOf(b [2]byte) uint16 { return uint16(b[0])<<8 | uint16(b[1]) }

// CollectConntrack is bpf.CollectConntrack for the datapath's lb_ct
// (m's), which tells the programs loaded over it the client ports of its
// flows too (ctPorts). The datapath cell's collector runs it.
func (d *Datapath) CollectConntrack(m *Maps) (CTCollection, error) {
	if m.Conntrack == nil {
		return CTCollection{}, nil
	}
	return CollectConntrack(m, m.Conntrack)
}
