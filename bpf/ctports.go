package bpf

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
)

// ctPorts are the datapath's own arrays of the client ports of lb_ct's
// flows (c/ct.h): lb_dp_ct_ports (every flow's client) and
// lb_dp_ct_pair_ports (the clients of flows with two entries). The
// programs set a port as they record a flow; the agent sets those of the
// flows in lb_ct when it loads the programs (which start with none) and
// at each collection (a flow an older datapath opened meanwhile). Nobody
// clears one: a port set too many costs a lookup, one missing would cost
// a flow its replies' translation.
type ctPorts struct {
	clients, pairs *ebpf.Map
	// known are the ports this process set, so that a collection writes
	// only new ones.
	knownClients, knownPairs map[uint16]bool
}

const (
	ctPortsMap     = "lb_dp_ct_ports"
	ctPairPortsMap = "lb_dp_ct_pair_ports"
)

// take keeps the arrays of a loaded collection.
func (p *ctPorts) take(maps map[string]*ebpf.Map) error {
	for name, dst := range map[string]**ebpf.Map{ctPortsMap: &p.clients, ctPairPortsMap: &p.pairs} {
		m := maps[name]
		if m == nil {
			return fmt.Errorf("the programs have no map %s", name)
		}
		c, err := m.Clone()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		*dst = c
	}
	p.knownClients, p.knownPairs = map[uint16]bool{}, map[uint16]bool{}
	return nil
}

// set marks the ports true in clients and pairs, returning how many it
// wrote.
func (p *ctPorts) set(clients, pairs *[1 << 16]bool) (int, error) {
	if p == nil || p.clients == nil {
		return 0, nil
	}
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

func (p *ctPorts) close() error {
	var errs []error
	for _, m := range []*ebpf.Map{p.clients, p.pairs} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	p.clients, p.pairs = nil, nil
	return errors.Join(errs...)
}

// portOf is a port in network order as a number.
func portOf(b [2]byte) uint16 { return uint16(b[0])<<8 | uint16(b[1]) }

// CollectConntrack is bpf.CollectConntrack for the datapath's lb_ct (m's),
// telling the programs the client ports of its flows too (ctPorts). The
// datapath cell's collector runs it.
func (d *Datapath) CollectConntrack(m *Maps) (CTCollection, error) {
	if m.Conntrack == nil {
		return CTCollection{}, nil
	}
	return collectConntrack(m, m.Conntrack, true, &d.ports)
}
