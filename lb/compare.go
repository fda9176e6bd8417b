package lb

import (
	"maps"
	"slices"
)

// Equal reports whether p and o declare the same service the same way.
func (p *ServiceParams) Equal(o *ServiceParams) bool {
	return p.Name == o.Name &&
		p.Source == o.Source &&
		slices.Equal(p.Frontends, o.Frontends) &&
		p.ExtTrafficPolicy == o.ExtTrafficPolicy &&
		p.IntTrafficPolicy == o.IntTrafficPolicy &&
		p.TrafficDistribution == o.TrafficDistribution &&
		slices.Equal(p.TopologyKeys, o.TopologyKeys) &&
		p.SessionAffinity == o.SessionAffinity &&
		p.SessionAffinityTimeout == o.SessionAffinityTimeout &&
		slices.Equal(p.SourceRanges, o.SourceRanges) &&
		p.Algorithm == o.Algorithm &&
		p.HealthCheckNodePort == o.HealthCheckNodePort &&
		p.Created.Equal(o.Created) &&
		maps.Equal(p.Annotations, o.Annotations)
}

// Equal reports whether p and o describe the same backend the same way.
func (p *BackendParams) Equal(o *BackendParams) bool {
	return p.Address == o.Address &&
		slices.Equal(p.PortNames(), o.PortNames()) &&
		p.Weight == o.Weight &&
		p.NodeName == o.NodeName &&
		p.Zone == o.Zone &&
		slices.Equal(p.ForZones(), o.ForZones()) &&
		slices.Equal(p.ForNodes(), o.ForNodes()) &&
		p.ClusterID == o.ClusterID &&
		p.State == o.State
}

// Clone returns a deep copy, sharing nothing with p.
func (p ServiceParams) Clone() ServiceParams {
	p.Frontends = slices.Clone(p.Frontends)
	p.SourceRanges = slices.Clone(p.SourceRanges)
	p.Annotations = maps.Clone(p.Annotations)
	p.TopologyKeys = slices.Clone(p.TopologyKeys)
	return p
}

// Clone returns a copy of p. BackendParams are values whose lists are
// immutable (set only with WithPortNames and WithTopologyHints), so the
// copy shares nothing that can change.
func (p BackendParams) Clone() BackendParams { return p }

// Clone returns a deep copy, sharing nothing with n.
func (n Node) Clone() Node {
	n.Labels = maps.Clone(n.Labels)
	n.Addresses = slices.Clone(n.Addresses)
	return n
}

// Equal reports whether n and o describe the node the same way.
func (n *Node) Equal(o *Node) bool {
	return n.Name == o.Name && n.Zone == o.Zone && maps.Equal(n.Labels, o.Labels) && slices.Equal(n.Addresses, o.Addresses)
}
