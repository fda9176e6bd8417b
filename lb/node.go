package lb

import (
	"net/netip"
	"strings"
)

// Node describes the node the agent runs on, as backend selection needs
// it: its name (for traffic policy Local and node hints), its zone (for
// zone hints), its labels and addresses (for NodePort frontends).
type Node struct {
	Name      string            `json:"name" yaml:"name"`
	Zone      string            `json:"zone,omitempty" yaml:"zone,omitempty"`
	Labels    map[string]string `json:"labels,omitempty" yaml:"labels,omitempty"`
	Addresses []netip.Addr      `json:"addresses,omitempty" yaml:"addresses,omitempty"`
}

func (n *Node) TableHeader() []string { return []string{"Name", "Zone", "Labels", "Addresses"} }

func (n *Node) TableRow() []string {
	addrs := make([]string, len(n.Addresses))
	for i, a := range n.Addresses {
		addrs[i] = a.String()
	}
	return []string{n.Name, n.Zone, formatLabels(n.Labels), strings.Join(addrs, ", ")}
}
