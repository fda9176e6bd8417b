package lb

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"
)

// DefaultAffinityTimeout is the session affinity timeout used when a service
// asks for affinity without a timeout, as in Kubernetes (3 hours).
const DefaultAffinityTimeout = 10800

// ServiceParams is what one source declares about a service: its frontends
// and the policy they share. It is the input to Writer.UpsertService.
//
// Its fields are ordered to pack (the small ones together at the end);
// encoded (JSON, YAML), they keep the order of serviceParamsRow.
type ServiceParams struct {
	Name ServiceName

	// Frontends are the addresses the datapath matches for this service.
	Frontends []FrontendParams

	// TopologyKeys, when set, replace TrafficDistribution: node label keys
	// tried in order, the first whose value on this node some usable
	// backend's node shares selects exactly those backends; "*" last falls
	// back to all, and without it the list is strict (no backend for new
	// flows when nothing matches). See ValidateTopologyKeys.
	TopologyKeys []string

	// SourceRanges, when set, limits the LoadBalancer frontends to clients
	// in these prefixes (loadBalancerSourceRanges, as kube-proxy applies
	// them).
	SourceRanges []netip.Prefix

	// Created is when the service was created (Kubernetes'
	// creationTimestamp), zero if unknown. Between equal claims on an
	// address from one source the older service owns it, so that a name
	// (a namespace renamed) never moves an address; an unknown time counts
	// as newer than every known one.
	Created time.Time

	// Annotations are the annotations that matter to other parts than the
	// Writer (health checking's lbstate.io/health-check*), as the source
	// found them: each part parses its own, so that a bad value is that
	// part's to report and does not reject the whole service.
	Annotations map[string]string

	// SessionAffinityTimeout is how long, in seconds, SessionAffinity
	// pins a client (0 means DefaultAffinityTimeout).
	SessionAffinityTimeout uint32

	// HealthCheckNodePort is where an external load balancer probes
	// whether this node has local backends (ExtTrafficPolicy Local).
	HealthCheckNodePort uint16

	Source Source

	// ExtTrafficPolicy applies to external frontends (NodePort,
	// LoadBalancer, ExternalIP, HostPort), IntTrafficPolicy to ClusterIP
	// frontends and to the internal-scope twins of external ones.
	ExtTrafficPolicy TrafficPolicy
	IntTrafficPolicy TrafficPolicy

	// TrafficDistribution turns on topology-aware selection using the
	// backends' zone or node hints.
	TrafficDistribution TrafficDistribution

	// SessionAffinity pins a client address to one backend for
	// SessionAffinityTimeout seconds.
	SessionAffinity bool

	Algorithm Algorithm
}

// FrontendParams is one address of a service that the datapath matches.
//
// Its fields are ordered to pack (Type and Claim beside the address);
// encoded (JSON, YAML), they keep the order of frontendParamsRow.
type FrontendParams struct {
	Address L3n4Addr
	Type    SVCType
	// Claim is how the service came to claim the address, which decides
	// who owns an address several services claim. The zero value,
	// ClaimExplicit, is right for any address named for the service.
	Claim Claim
	// PortName selects the backends whose port names include it. Empty
	// matches backends that name no port (a single-port service).
	PortName string
}

// UsesExternalTrafficPolicy reports whether the service's external
// traffic policy applies to the frontend, as in Kubernetes: to the
// external-scope addresses of external types (NodePort, LoadBalancer,
// ExternalIP, HostPort), where traffic comes from outside the cluster. The
// internal policy applies to every other frontend, including the
// internal-scope twins of external ones.
func (f FrontendParams) UsesExternalTrafficPolicy() bool {
	return f.Type.IsExternal() && f.Address.Scope() == ScopeExternal
}

// TrafficPolicyFor returns the traffic policy that applies to one of the
// service's frontends (see FrontendParams.UsesExternalTrafficPolicy).
func (p *ServiceParams) TrafficPolicyFor(fe FrontendParams) TrafficPolicy {
	if fe.UsesExternalTrafficPolicy() {
		return p.ExtTrafficPolicy
	}
	return p.IntTrafficPolicy
}

// AffinityTimeout is the effective session affinity timeout in seconds, or
// 0 when the service has no session affinity.
func (p *ServiceParams) AffinityTimeout() uint32 {
	switch {
	case !p.SessionAffinity:
		return 0
	case p.SessionAffinityTimeout == 0:
		return DefaultAffinityTimeout
	}
	return p.SessionAffinityTimeout
}

// Validate reports the first problem with the declaration, naming the
// service and the field.
func (p *ServiceParams) Validate() error {
	if err := p.validate(); err != nil {
		return fmt.Errorf("service %s: %w", p.Name, err)
	}
	return nil
}

func (p *ServiceParams) validate() error {
	if err := p.Name.Validate(); err != nil {
		return fmt.Errorf("name: %w", err)
	}
	if !p.Source.Valid() {
		return fmt.Errorf("source: unknown source %s", p.Source)
	}
	for _, check := range []struct {
		field string
		ok    bool
	}{
		{"extTrafficPolicy", trafficPolicyNames.Valid(p.ExtTrafficPolicy)},
		{"intTrafficPolicy", trafficPolicyNames.Valid(p.IntTrafficPolicy)},
		{"trafficDistribution", trafficDistributionNames.Valid(p.TrafficDistribution)},
		{"algorithm", algorithmNames.Valid(p.Algorithm)},
	} {
		if !check.ok {
			return fmt.Errorf("%s: value out of range", check.field)
		}
	}
	if err := ValidateTopologyKeys(p.TopologyKeys); err != nil {
		return fmt.Errorf("topologyKeys: %w", err)
	}
	var seen map[L3n4Addr]struct{} // only for a long list: see listedBefore
	if len(p.Frontends) > maxScannedFrontends {
		seen = make(map[L3n4Addr]struct{}, len(p.Frontends))
	}
	for i, fe := range p.Frontends {
		if err := fe.Validate(); err != nil {
			return fmt.Errorf("frontends[%d]: %w", i, err)
		}
		if p.listedBefore(i, seen) {
			return fmt.Errorf("frontends[%d]: address %s listed twice", i, fe.Address)
		}
	}
	if y := p.Created.Year(); y < 0 || y > 9999 {
		return fmt.Errorf("created: year %d is outside 0-9999", y)
	}
	for i, r := range p.SourceRanges {
		if !r.IsValid() {
			return fmt.Errorf("sourceRanges[%d]: invalid prefix", i)
		}
		if r != r.Masked() {
			return fmt.Errorf("sourceRanges[%d]: %s has host bits set (want %s)", i, r, r.Masked())
		}
	}
	return nil
}

// maxScannedFrontends is the longest list of frontends whose duplicates
// validate finds by comparing each with those before it: a service has a
// handful, and a map made for them cost more than the comparisons (a
// declaration is validated twice on its way in, by its source and by the
// Writer).
const maxScannedFrontends = 16

// listedBefore reports whether frontend i's address is listed before it,
// looking in seen (and adding it) when there is a seen.
func (p *ServiceParams) listedBefore(i int, seen map[L3n4Addr]struct{}) bool {
	addr := p.Frontends[i].Address
	if seen != nil {
		_, dup := seen[addr]
		seen[addr] = struct{}{}
		return dup
	}
	for j := range i {
		if p.Frontends[j].Address == addr {
			return true
		}
	}
	return false
}

// Validate reports what is wrong with the frontend.
func (f FrontendParams) Validate() error {
	if err := f.Address.Validate(); err != nil {
		return fmt.Errorf("address: %w", err)
	}
	if !svcTypeNames.Valid(f.Type) {
		return fmt.Errorf("%s: type: missing or unknown service type (want one of %s)", f.Address, svcTypeNames.choices())
	}
	if problem := f.Claim.validFor(f.Type); problem != "" {
		return fmt.Errorf("%s: claim: %s", f.Address, problem)
	}
	return nil
}

// Redirect replaces the backends of a service's frontends with those of
// another service, e.g. a local redirect policy sending traffic for a
// service to a node-local pod. It is kept beside the service, so it
// survives later upserts, and clearing it restores the original backends.
//
// A redirect may cover only some of the service's frontends: a local
// redirect policy's serviceMatcher redirects the ClusterIP frontends, and
// only the ports it lists. The others keep the service's own backends.
type Redirect struct {
	Source Source      `json:"source" yaml:"source"`
	To     ServiceName `json:"to" yaml:"to"`
	// ClusterIPOnly limits the redirect to ClusterIP frontends.
	ClusterIPOnly bool `json:"clusterIPOnly,omitempty" yaml:"clusterIPOnly,omitempty"`
	// Ports, if not empty, limits the redirect to the frontends matching
	// one of them.
	Ports []RedirectPort `json:"ports,omitempty" yaml:"ports,omitempty"`
	// SkipFromBackend leaves the traffic of To's backends themselves to
	// the service's own backends (a local redirect policy's
	// skipRedirectFromBackend): a node-local DNS cache still reaches the
	// real DNS service.
	SkipFromBackend bool `json:"skipFromBackend,omitempty" yaml:"skipFromBackend,omitempty"`
}

// RedirectPort matches a frontend by its port name or, when Name is
// empty, by its port number (0: any) and protocol.
type RedirectPort struct {
	Name     string   `json:"name,omitempty" yaml:"name,omitempty"`
	Port     uint16   `json:"port,omitempty" yaml:"port,omitempty"`
	Protocol Protocol `json:"protocol,omitempty" yaml:"protocol,omitempty"`
}

// Covers reports whether the redirect applies to the frontend fe.
func (r Redirect) Covers(fe FrontendParams) bool {
	if r.ClusterIPOnly && fe.Type != SVCTypeClusterIP {
		return false
	}
	if len(r.Ports) == 0 {
		return true
	}
	return slices.ContainsFunc(r.Ports, func(p RedirectPort) bool {
		if p.Name != "" {
			return p.Name == fe.PortName
		}
		return (p.Port == 0 || p.Port == fe.Address.Port()) && p.Protocol == fe.Address.Protocol()
	})
}

// Equal reports whether two redirects are the same.
func (r Redirect) Equal(o Redirect) bool {
	return r.Source == o.Source && r.To == o.To && r.ClusterIPOnly == o.ClusterIPOnly &&
		r.SkipFromBackend == o.SkipFromBackend && slices.Equal(r.Ports, o.Ports)
}

func (r Redirect) String() string { return r.To.String() + " (" + r.Source.String() + ")" }

// FrontendConflict records that a service declares a frontend address that
// another service owns.
type FrontendConflict struct {
	Address L3n4Addr    `json:"address" yaml:"address"`
	Owner   ServiceName `json:"owner" yaml:"owner"`
}

func (c FrontendConflict) Error() string {
	return fmt.Sprintf("frontend %s is owned by service %s", c.Address, c.Owner)
}

// Service is a row of the services table: every source's declaration of
// one service, the redirect and route overrides if any, and the frontends
// it could not claim.
//
// The overrides and conflicts, which most services have none of, sit
// behind one pointer, read with their accessors (Redirects, Routes, ...)
// and set with the With methods. Encoded (JSON, YAML), a service has them
// as fields of their own.
type Service struct {
	Name ServiceName

	// Params has one declaration per source, highest priority first. The
	// first one is in force. It is empty for a service that exists only
	// because a redirect was set on it.
	Params []ServiceParams

	overrides *serviceOverrides // nil when it has none

	// backends and nBackends are the addresses of the backends with an
	// instance for the service (from any source), sorted: the Writer keeps
	// them here, so that a service finds its backends without an index
	// entry (and its watch channel) per backend. See BackendAddrs. (A
	// pointer and a count, not a slice: 12 bytes where a slice takes 24
	// bring the row from 112 to 96 bytes.)
	backends *L3n4Addr
	// oneBackend holds backends when there is one (most services), so
	// that the row and its list are one allocation.
	oneBackend [1]L3n4Addr
	nBackends  uint32
}

// serviceOverrides are the parts of a service row that most services
// leave empty.
type serviceOverrides struct {
	redirects      []Redirect
	proxyRedirects []ProxyRedirect
	routes         []Route
	conflicts      []FrontendConflict
}

func (o *serviceOverrides) isZero() bool {
	return len(o.redirects) == 0 && len(o.proxyRedirects) == 0 && len(o.routes) == 0 && len(o.conflicts) == 0
}

var noOverrides serviceOverrides

func (s *Service) over() *serviceOverrides {
	if s.overrides == nil {
		return &noOverrides
	}
	return s.overrides
}

// Redirects has at most one redirect per source, highest priority first;
// the first one is in force. The caller must not modify the slice.
func (s *Service) Redirects() []Redirect { return s.over().redirects }

// ProxyRedirects has at most one L7 proxy redirect per source, highest
// priority first; the first one is in force. The caller must not modify
// the slice.
func (s *Service) ProxyRedirects() []ProxyRedirect { return s.over().proxyRedirects }

// Routes are the traffic splits set on the service, ordered by source
// priority, then port (see Route and RouteFor). The caller must not
// modify the slice.
func (s *Service) Routes() []Route { return s.over().routes }

// Conflicts lists the frontends this service declares but another
// service owns. The caller must not modify the slice.
func (s *Service) Conflicts() []FrontendConflict { return s.over().conflicts }

// withOverrides returns a copy whose overrides change makes from s's.
func (s *Service) withOverrides(change func(o *serviceOverrides)) *Service {
	c := s.Clone()
	o := *s.over()
	change(&o)
	c.overrides = nil
	if !o.isZero() {
		c.overrides = new(serviceOverrides)
		*c.overrides = o
	}
	return c
}

// WithConflicts returns a copy whose Conflicts are conflicts (the copy
// keeps the slice). Only the tables' Writer keeps them.
func (s *Service) WithConflicts(conflicts []FrontendConflict) *Service {
	return s.withOverrides(func(o *serviceOverrides) { o.conflicts = conflicts })
}

// BackendAddrs returns the addresses of the backends that have an
// instance for the service, from any source, sorted (as the Writer keeps
// them: tables.Writer.BackendsOf yields the rows). The caller must not
// modify the slice.
func (s *Service) BackendAddrs() []L3n4Addr {
	if s.nBackends == 0 {
		return nil
	}
	return unsafe.Slice(s.backends, s.nBackends)
}

// WithBackendAddrs returns a copy whose BackendAddrs are addrs (sorted by
// L3n4Addr.Compare, each once; the copy keeps a copy of them). Only the
// tables' Writer keeps them.
func (s *Service) WithBackendAddrs(addrs []L3n4Addr) *Service {
	c := s.Clone()
	if len(addrs) > 1 {
		addrs = slices.Clone(addrs)
	}
	c.setBackends(addrs)
	return c
}

// SetBackendAddrs sets BackendAddrs to a copy of addrs in place. Rows are
// immutable once others may see them: only the tables' Writer calls it,
// on a row its write transaction inserted and no one has read since.
func (s *Service) SetBackendAddrs(addrs []L3n4Addr) {
	if len(addrs) > 1 {
		addrs = slices.Clone(addrs)
	}
	s.setBackends(addrs)
}

// setBackends keeps addrs as the backend addresses, in the row itself
// when there is one.
func (s *Service) setBackends(addrs []L3n4Addr) {
	switch len(addrs) {
	case 0:
		s.oneBackend[0], s.backends, s.nBackends = L3n4Addr{}, nil, 0
	case 1:
		s.oneBackend[0] = addrs[0] // addrs may be s.oneBackend[:]
		s.backends, s.nBackends = &s.oneBackend[0], 1
	default:
		s.oneBackend[0] = L3n4Addr{}
		s.backends, s.nBackends = &addrs[0], uint32(len(addrs))
	}
}

// Policy returns the declaration in force, or nil if no source declares the
// service.
func (s *Service) Policy() *ServiceParams {
	if len(s.Params) == 0 {
		return nil
	}
	return &s.Params[0]
}

// Redirect returns the redirect in force, or nil.
func (s *Service) Redirect() *Redirect {
	if rs := s.Redirects(); len(rs) > 0 {
		return &rs[0]
	}
	return nil
}

// ProxyRedirect returns the L7 proxy redirect in force, or nil.
func (s *Service) ProxyRedirect() *ProxyRedirect {
	if prs := s.ProxyRedirects(); len(prs) > 0 {
		return &prs[0]
	}
	return nil
}

// Sources lists the sources that declare the service, highest priority
// first.
func (s *Service) Sources() []Source {
	out := make([]Source, len(s.Params))
	for i := range s.Params {
		out[i] = s.Params[i].Source
	}
	return out
}

// Clone returns a shallow copy whose slices may be replaced safely.
func (s *Service) Clone() *Service {
	c := *s
	c.setBackends(s.BackendAddrs()) // not pointing into s
	return &c
}

// WithParams returns a copy with p in place of the same source's
// declaration. The copy shares p's slices but for Frontends, of which it
// keeps a copy of its own.
func (s *Service) WithParams(p ServiceParams) *Service {
	c := s.Clone()
	if len(s.Params) == 0 || len(s.Params) == 1 && s.Params[0].Source == p.Source {
		c.Params = oneDeclaration(p)
		return c
	}
	p.Frontends = slices.Clone(p.Frontends)
	c.Params = withBySource(s.Params, p, ServiceParams.source)
	return c
}

// declarationWithOne is a service's only declaration with its only
// frontend (most services have one of each), in one allocation.
type declarationWithOne struct {
	p  [1]ServiceParams
	fe [1]FrontendParams
}

// oneDeclaration returns p as a one-element list of declarations,
// keeping a copy of its frontends.
func oneDeclaration(p ServiceParams) []ServiceParams {
	if len(p.Frontends) != 1 {
		p.Frontends = slices.Clone(p.Frontends)
		return []ServiceParams{p}
	}
	d := &declarationWithOne{p: [1]ServiceParams{p}, fe: [1]FrontendParams{p.Frontends[0]}}
	d.p[0].Frontends = d.fe[:]
	return d.p[:]
}

// WithoutSource returns a copy without the source's declaration.
func (s *Service) WithoutSource(src Source) *Service {
	c := s.Clone()
	c.Params = withoutSource(s.Params, src, ServiceParams.source)
	return c
}

// WithRedirect returns a copy with r in place of the same source's
// redirect.
func (s *Service) WithRedirect(r Redirect) *Service {
	return s.withOverrides(func(o *serviceOverrides) { o.redirects = withBySource(o.redirects, r, Redirect.source) })
}

// WithoutRedirect returns a copy without the source's redirect.
func (s *Service) WithoutRedirect(src Source) *Service {
	return s.withOverrides(func(o *serviceOverrides) { o.redirects = withoutSource(o.redirects, src, Redirect.source) })
}

// WithProxyRedirect returns a copy with pr in place of the same source's
// proxy redirect.
func (s *Service) WithProxyRedirect(pr ProxyRedirect) *Service {
	return s.withOverrides(func(o *serviceOverrides) {
		o.proxyRedirects = withBySource(o.proxyRedirects, pr, ProxyRedirect.source)
	})
}

// WithoutProxyRedirect returns a copy without the source's proxy redirect.
func (s *Service) WithoutProxyRedirect(src Source) *Service {
	return s.withOverrides(func(o *serviceOverrides) {
		o.proxyRedirects = withoutSource(o.proxyRedirects, src, ProxyRedirect.source)
	})
}

// Overridden reports whether the service row exists for more than its
// declarations: a redirect, a proxy redirect or a route is kept for it.
func (s *Service) Overridden() bool {
	o := s.over()
	return len(o.redirects) > 0 || len(o.proxyRedirects) > 0 || len(o.routes) > 0
}

func (p ServiceParams) source() Source  { return p.Source }
func (r Redirect) source() Source       { return r.Source }
func (pr ProxyRedirect) source() Source { return pr.Source }

// withBySource returns a copy of xs, kept sorted by source priority, with
// x in place of the element from x's source.
func withBySource[T any](xs []T, x T, source func(T) Source) []T {
	out := slices.Clone(xs)
	i, found := slices.BinarySearchFunc(out, source(x), func(e T, src Source) int {
		return source(e).Compare(src)
	})
	if found {
		out[i] = x
		return out
	}
	return slices.Insert(out, i, x)
}

// withoutSource returns a copy of xs without the element from src.
func withoutSource[T any](xs []T, src Source, source func(T) Source) []T {
	if len(xs) > 0 && !slices.ContainsFunc(xs, func(x T) bool { return source(x) != src }) {
		return []T{} // nothing left (a deleted declaration, usually): no copy to make
	}
	return slices.DeleteFunc(slices.Clone(xs), func(x T) bool { return source(x) == src })
}

func (s *Service) TableHeader() []string {
	return []string{"Name", "Sources", "Frontends", "Policy", "Redirect", "Conflicts"}
}

func (s *Service) TableRow() []string {
	sources := make([]string, len(s.Params))
	for i, p := range s.Params {
		sources[i] = p.Source.String()
	}
	o := s.over()
	redirects := make([]string, len(o.redirects))
	for i, r := range o.redirects {
		redirects[i] = r.String()
	}
	for _, pr := range o.proxyRedirects {
		redirects = append(redirects, pr.String())
	}
	for _, r := range o.routes {
		redirects = append(redirects, "route "+r.String())
	}
	redirect := strings.Join(redirects, ", ")
	conflicts := make([]string, len(o.conflicts))
	for i, c := range o.conflicts {
		conflicts[i] = c.Address.String() + " owned by " + c.Owner.String()
	}
	frontends, policy := "", ""
	if p := s.Policy(); p != nil {
		frontends = strconv.Itoa(len(p.Frontends))
		policy = p.policySummary()
	}
	return []string{s.Name.String(), strings.Join(sources, ", "), frontends, policy, redirect, strings.Join(conflicts, ", ")}
}

// policySummary lists the policy settings that differ from the defaults.
func (p *ServiceParams) policySummary() string {
	var out []string
	if p.ExtTrafficPolicy != TrafficPolicyCluster {
		out = append(out, "ExtTrafficPolicy="+p.ExtTrafficPolicy.String())
	}
	if p.IntTrafficPolicy != TrafficPolicyCluster {
		out = append(out, "IntTrafficPolicy="+p.IntTrafficPolicy.String())
	}
	if p.TrafficDistribution != TrafficDistributionDefault {
		out = append(out, "TrafficDistribution="+p.TrafficDistribution.String())
	}
	if len(p.TopologyKeys) > 0 {
		out = append(out, "TopologyKeys="+strings.Join(p.TopologyKeys, "+"))
	}
	if t := p.AffinityTimeout(); t != 0 {
		out = append(out, "SessionAffinity="+strconv.FormatUint(uint64(t), 10)+"s")
	}
	if len(p.SourceRanges) > 0 {
		ranges := make([]string, len(p.SourceRanges))
		for i, r := range p.SourceRanges {
			ranges[i] = r.String()
		}
		out = append(out, "SourceRanges="+strings.Join(ranges, "+"))
	}
	if p.Algorithm != AlgorithmDefault {
		out = append(out, "Algorithm="+p.Algorithm.String())
	}
	if p.HealthCheckNodePort != 0 {
		out = append(out, "HealthCheckNodePort="+strconv.Itoa(int(p.HealthCheckNodePort)))
	}
	return strings.Join(out, ", ")
}

// Validate reports what is wrong with a redirect of service name.
func (r Redirect) Validate(name ServiceName) error {
	switch {
	case !r.Source.Valid():
		return fmt.Errorf("service %s: redirect source: unknown source %s", name, r.Source)
	case r.To.IsZero():
		return fmt.Errorf("service %s: redirect target: missing service name", name)
	case r.To == name:
		return fmt.Errorf("service %s: redirect target: a service cannot redirect to itself", name)
	}
	if err := r.To.Validate(); err != nil {
		return fmt.Errorf("service %s: redirect target: %w", name, err)
	}
	return nil
}
