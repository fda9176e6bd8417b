package lb

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultBackendWeight is the weight of a backend whose source gives none.
// Weights are relative: a backend of weight 200 gets twice the new flows of
// one of weight 100. Weight 0 means no new flows.
const DefaultBackendWeight = 100

// BackendParams is what one source says about one backend of one service.
// It is the input to the Writer's backend operations.
//
// Its fields are ordered to pack (the small ones together after the
// address); encoded (JSON, YAML) they keep the order of backendParamsRow.
type BackendParams struct {
	Address L3n4Addr

	// Weight is the share of new flows, relative to the other backends
	// (0-65535; 0 means no new flows). Decoding JSON or YAML without a
	// weight gives DefaultBackendWeight; a Go literal must set it.
	Weight uint16

	// ClusterID is the cluster the backend runs in: 0 for this cluster
	// (the one the agent serves), another ID (1-511 in a mesh) for a
	// remote cluster's, whichever source wrote it. See Remote.
	ClusterID uint32
	State     BackendState

	NodeName string
	Zone     string

	// hints are the port names and topology hints, nil without any: see
	// PortNames, ForZones and ForNodes, set with WithPortNames and
	// WithTopologyHints.
	hints *backendHints
}

// Remote reports whether the backend runs in another cluster: only a
// global service (ServiceParams.IsGlobal) selects it.
func (p *BackendParams) Remote() bool { return p.ClusterID != 0 }

// Validate reports what is wrong with the backend, naming its address.
func (p *BackendParams) Validate() error {
	if err := p.Address.Validate(); err != nil {
		return fmt.Errorf("backend address: %w", err)
	}
	switch a := p.Address.Addr(); {
	case a.IsUnspecified():
		return fmt.Errorf("backend %s: address: unspecified address", p.Address)
	case a.IsMulticast():
		return fmt.Errorf("backend %s: address: multicast address", p.Address)
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return fmt.Errorf("backend %s: address: broadcast address", p.Address)
	}
	if p.Address.Scope() != ScopeExternal {
		return fmt.Errorf("backend %s: address: backends have no scope", p.Address)
	}
	if !backendStateNames.Valid(p.State) {
		return fmt.Errorf("backend %s: state: value out of range", p.Address)
	}
	for i, n := range p.PortNames() {
		if n == "" {
			return fmt.Errorf("backend %s: portNames[%d]: empty name", p.Address, i)
		}
	}
	return nil
}

// MatchesPort reports whether the backend serves a frontend port named
// portName with protocol proto.
func (p *BackendParams) MatchesPort(portName string, proto Protocol) bool {
	if proto != ProtoAny && p.Address.Protocol() != ProtoAny && proto != p.Address.Protocol() {
		return false
	}
	names := p.PortNames()
	return len(names) == 0 || slices.Contains(names, portName)
}

// BackendInstance is one source's view of a backend for one service.
type BackendInstance struct {
	Service ServiceName   `json:"service" yaml:"service"`
	Source  Source        `json:"source" yaml:"source"`
	Params  BackendParams `json:"params" yaml:"params"`
}

// Backend is a row of the backends table: one backend address, shared by
// every service and source that uses it.
//
// Its fields are ordered to pack (Unhealthy beside the address); encoded
// (JSON, YAML), they keep the order of backendRow.
type Backend struct {
	Address L3n4Addr

	// Unhealthy is set by health checking; an unhealthy active backend is
	// treated as quarantined.
	Unhealthy bool

	// Instances are sorted by service, then by source priority.
	Instances []BackendInstance

	// health holds the details of the verdict, nil without any (most
	// backends are never checked): see HealthSince and HealthError.
	health *healthDetails
}

type healthDetails struct {
	since time.Time
	err   string
}

// HealthSince is since when the health verdict holds; zero if unknown.
func (b *Backend) HealthSince() time.Time {
	if b.health == nil {
		return time.Time{}
	}
	return b.health.since
}

// HealthError is the last failure the health checker saw; empty if none.
func (b *Backend) HealthError() string {
	if b.health == nil {
		return ""
	}
	return b.health.err
}

func compareInstanceKey(inst BackendInstance, name ServiceName, src Source) int {
	if c := inst.Service.Compare(name); c != 0 {
		return c
	}
	return inst.Source.Compare(src)
}

// Instance returns the instance for the service from the source.
func (b *Backend) Instance(name ServiceName, src Source) (*BackendInstance, bool) {
	i, found := slices.BinarySearchFunc(b.Instances, name, func(inst BackendInstance, n ServiceName) int {
		return compareInstanceKey(inst, n, src)
	})
	if !found {
		return nil, false
	}
	return &b.Instances[i], true
}

// ForService returns the instance in force for a service: the one from the
// highest-priority source that has one.
func (b *Backend) ForService(name ServiceName) (*BackendInstance, bool) {
	for i := range b.Instances {
		if b.Instances[i].Service == name {
			return &b.Instances[i], true
		}
	}
	return nil, false
}

// WithInstance returns a copy of b with inst added or replacing the
// instance of the same service and source.
func (b *Backend) WithInstance(inst BackendInstance) *Backend {
	i, found := slices.BinarySearchFunc(b.Instances, inst, func(e, t BackendInstance) int {
		return compareInstanceKey(e, t.Service, t.Source)
	})
	if len(b.Instances) == 0 || found && len(b.Instances) == 1 {
		return b.withOneInstance(inst)
	}
	c := *b
	c.Instances = slices.Clone(b.Instances)
	if found {
		c.Instances[i] = inst
	} else {
		c.Instances = slices.Insert(c.Instances, i, inst)
	}
	return &c
}

// Without returns a copy of b without the instances for which drop is true.
func (b *Backend) Without(drop func(*BackendInstance) bool) *Backend {
	insts := slices.DeleteFunc(slices.Clone(b.Instances), func(i BackendInstance) bool { return drop(&i) })
	if len(insts) == 1 {
		return b.withOneInstance(insts[0])
	}
	c := *b
	c.Instances = insts
	return &c
}

// backendWithOne is a backend row with one instance (most have one) in
// a single allocation, 16 bytes and an object less than two.
type backendWithOne struct {
	b   Backend
	one [1]BackendInstance
}

// withOneInstance returns a copy of b whose only instance is inst.
func (b *Backend) withOneInstance(inst BackendInstance) *Backend {
	c := &backendWithOne{b: *b, one: [1]BackendInstance{inst}}
	c.b.Instances = c.one[:]
	return &c.b
}

// Services lists the services that use this backend, each once.
func (b *Backend) Services() []ServiceName {
	var out []ServiceName
	for _, inst := range b.Instances {
		if len(out) == 0 || out[len(out)-1] != inst.Service {
			out = append(out, inst.Service)
		}
	}
	return out
}

func (b *Backend) TableHeader() []string {
	return []string{"Address", "Cluster", "Instances", "Health", "HealthSince", "LastError"}
}

func (b *Backend) TableRow() []string {
	insts := make([]string, len(b.Instances))
	for i, inst := range b.Instances {
		insts[i] = inst.String()
	}
	return append([]string{b.Address.String(), b.clusters(), strings.Join(insts, ", ")}, b.healthColumns()...)
}

// clusters lists the remote clusters (IDs) that offer the backend, each
// once: empty for this cluster's own.
func (b *Backend) clusters() string {
	var ids []uint32
	for _, inst := range b.Instances {
		if id := inst.Params.ClusterID; id != 0 && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strconv.FormatUint(uint64(id), 10)
	}
	return strings.Join(out, ",")
}

// String prints the instance compactly: the service and source, then the
// fields that differ from their defaults.
func (inst *BackendInstance) String() string {
	var attrs []string
	p := &inst.Params
	if names := p.PortNames(); len(names) > 0 {
		attrs = append(attrs, "ports="+strings.Join(names, "+"))
	}
	if p.Weight != DefaultBackendWeight {
		attrs = append(attrs, "weight="+strconv.Itoa(int(p.Weight)))
	}
	if p.State != BackendActive {
		attrs = append(attrs, p.State.String())
	}
	if p.NodeName != "" {
		attrs = append(attrs, "node="+p.NodeName)
	}
	if p.Zone != "" {
		attrs = append(attrs, "zone="+p.Zone)
	}
	if zones := p.ForZones(); len(zones) > 0 {
		attrs = append(attrs, "forZones="+strings.Join(zones, "+"))
	}
	if nodes := p.ForNodes(); len(nodes) > 0 {
		attrs = append(attrs, "forNodes="+strings.Join(nodes, "+"))
	}
	if p.ClusterID != 0 {
		attrs = append(attrs, "cluster="+strconv.FormatUint(uint64(p.ClusterID), 10))
	}
	s := inst.Service.String() + " [" + inst.Source.String()
	if len(attrs) > 0 {
		s += "; " + strings.Join(attrs, " ")
	}
	return s + "]"
}
