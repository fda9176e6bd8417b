package lb

import (
	"fmt"
	"strings"
)

// enumNames maps the values of a small enum (0..n-1) to their names.
// Parsing is case-insensitive; printing uses the canonical spelling.
type enumNames[T ~uint8] struct {
	kind  string
	names []string
}

func (e enumNames[T]) String(v T) string {
	if int(v) < len(e.names) && e.names[v] != "" {
		return e.names[v]
	}
	return fmt.Sprintf("%s(%d)", e.kind, uint8(v))
}

func (e enumNames[T]) Parse(s string) (T, error) {
	for i, n := range e.names {
		if n != "" && strings.EqualFold(n, s) {
			return T(i), nil
		}
	}
	return 0, fmt.Errorf("unknown %s %q (want one of %s)", e.kind, s, e.choices())
}

func (e enumNames[T]) Valid(v T) bool {
	return int(v) < len(e.names) && e.names[v] != ""
}

func (e enumNames[T]) choices() string {
	var out []string
	for _, n := range e.names {
		if n != "" {
			out = append(out, n)
		}
	}
	return strings.Join(out, ", ")
}

// SVCType is the kind of a frontend: how traffic reaches it.
type SVCType uint8

const (
	SVCTypeClusterIP SVCType = iota + 1
	SVCTypeNodePort
	SVCTypeLoadBalancer
	SVCTypeExternalIP
	SVCTypeHostPort
	SVCTypeLocalRedirect
)

var svcTypeNames = enumNames[SVCType]{"service type", []string{
	"", "ClusterIP", "NodePort", "LoadBalancer", "ExternalIP", "HostPort", "LocalRedirect"}}

func (t SVCType) String() string               { return svcTypeNames.String(t) }
func (t SVCType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }
func (t *SVCType) UnmarshalText(b []byte) (err error) {
	*t, err = svcTypeNames.Parse(string(b))
	return
}

// IsExternal reports whether traffic to frontends of this type comes from
// outside the cluster, so that the external traffic policy applies.
func (t SVCType) IsExternal() bool {
	switch t {
	case SVCTypeNodePort, SVCTypeLoadBalancer, SVCTypeExternalIP, SVCTypeHostPort:
		return true
	}
	return false
}

// TrafficPolicy says which backends a frontend may use: all of them
// (Cluster, the default) or only those on this node (Local).
type TrafficPolicy uint8

const (
	TrafficPolicyCluster TrafficPolicy = iota
	TrafficPolicyLocal
)

var trafficPolicyNames = enumNames[TrafficPolicy]{"traffic policy", []string{"Cluster", "Local"}}

func (p TrafficPolicy) String() string               { return trafficPolicyNames.String(p) }
func (p TrafficPolicy) MarshalText() ([]byte, error) { return []byte(p.String()), nil }
func (p *TrafficPolicy) UnmarshalText(b []byte) (err error) {
	*p, err = trafficPolicyNames.Parse(string(b))
	return
}

// TrafficDistribution asks for topology-aware routing: prefer backends
// hinted for this node's zone, or for this node.
type TrafficDistribution uint8

const (
	TrafficDistributionDefault TrafficDistribution = iota
	TrafficDistributionPreferSameZone
	TrafficDistributionPreferSameNode
)

var trafficDistributionNames = enumNames[TrafficDistribution]{"traffic distribution", []string{
	"Default", "PreferSameZone", "PreferSameNode"}}

func (d TrafficDistribution) String() string               { return trafficDistributionNames.String(d) }
func (d TrafficDistribution) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText accepts Kubernetes' PreferClose as PreferSameZone, which is
// what Kubernetes defines it to mean.
func (d *TrafficDistribution) UnmarshalText(b []byte) (err error) {
	if strings.EqualFold(string(b), "PreferClose") {
		*d = TrafficDistributionPreferSameZone
		return nil
	}
	*d, err = trafficDistributionNames.Parse(string(b))
	return
}

// BackendState is the lifecycle state of a backend as its source sees it.
// Selection prefers active backends, falls back to terminating ones, and
// uses quarantined ones only when nothing else is left; maintenance and
// not-ready backends never take new flows. Every backend that takes no new
// flows stays listed (weight 0) so that the flows it already carries keep
// their backend until it leaves its source.
//
// The values are the map ABI's (LB_BACKEND_* in bpf/include/lb.h).
type BackendState uint8

const (
	BackendActive BackendState = iota
	BackendTerminating
	BackendQuarantined
	BackendMaintenance
	// BackendNotReady is an endpoint that failed its readiness probe or is
	// being drained, without terminating: Kubernetes takes it out of
	// rotation, but its established connections go on (kube-proxy's
	// conntrack keeps them, and so does a datapath that finds the backend).
	BackendNotReady
)

var backendStateNames = enumNames[BackendState]{"backend state", []string{
	"active", "terminating", "quarantined", "maintenance", "not-ready"}}

func (s BackendState) String() string               { return backendStateNames.String(s) }
func (s BackendState) MarshalText() ([]byte, error) { return []byte(s.String()), nil }
func (s *BackendState) UnmarshalText(b []byte) (err error) {
	*s, err = backendStateNames.Parse(string(b))
	return
}

// Algorithm is how the datapath picks a backend for a new flow.
// AlgorithmDefault defers to the agent's configured default.
type Algorithm uint8

const (
	AlgorithmDefault Algorithm = iota
	AlgorithmRandom
	AlgorithmMaglev
)

var algorithmNames = enumNames[Algorithm]{"algorithm", []string{"default", "random", "maglev"}}

func (a Algorithm) String() string               { return algorithmNames.String(a) }
func (a Algorithm) MarshalText() ([]byte, error) { return []byte(a.String()), nil }
func (a *Algorithm) UnmarshalText(b []byte) (err error) {
	*a, err = algorithmNames.Parse(string(b))
	return
}
