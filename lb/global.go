package lb

import (
	"fmt"
	"strings"
)

// Cilium's clustermesh annotations on a local Service, carried in
// ServiceParams.Annotations as the source found them.
const (
	// AnnotationGlobal "true" makes a service global: it takes the
	// backends other clusters share for its namespace and name.
	AnnotationGlobal = "service.cilium.io/global"
	// AnnotationShared "false" keeps a global service's backends from
	// being offered to other clusters (the exporter's concern).
	AnnotationShared = "service.cilium.io/shared"
	// AnnotationAffinity (local, remote, none) prefers one cluster's
	// backends of a global service.
	AnnotationAffinity = "service.cilium.io/affinity"
)

// IsGlobal reports whether the service takes other clusters' backends.
// Without it, backends a remote cluster offers are never selected: a
// remote service alone cannot make a local one global.
func (p *ServiceParams) IsGlobal() bool {
	return strings.EqualFold(p.Annotations[AnnotationGlobal], "true")
}

// ClusterAffinity is a global service's preference between this
// cluster's backends and other clusters' (AnnotationAffinity).
type ClusterAffinity uint8

const (
	// AffinityNone uses every cluster's backends alike.
	AffinityNone ClusterAffinity = iota
	// AffinityLocal uses other clusters' backends only while this
	// cluster has no active backend for the frontend.
	AffinityLocal
	// AffinityRemote uses this cluster's backends only while no other
	// cluster has an active backend for the frontend.
	AffinityRemote
)

func (a ClusterAffinity) String() string {
	switch a {
	case AffinityLocal:
		return "local"
	case AffinityRemote:
		return "remote"
	}
	return "none"
}

// ParseClusterAffinity reads an AnnotationAffinity value: local, remote
// or none (any case; empty is none), as Cilium reads it.
func ParseClusterAffinity(s string) (ClusterAffinity, error) {
	for _, a := range []ClusterAffinity{AffinityNone, AffinityLocal, AffinityRemote} {
		if strings.EqualFold(s, a.String()) {
			return a, nil
		}
	}
	if s == "" {
		return AffinityNone, nil
	}
	return AffinityNone, fmt.Errorf("annotation %s: unknown value %q (local, remote or none)", AnnotationAffinity, s)
}

// ClusterAffinity returns the service's AnnotationAffinity; an invalid
// value means none (the Kubernetes source drops it, logging and counting
// it). It matters only to a global service: no other has other
// clusters' backends.
func (p *ServiceParams) ClusterAffinity() ClusterAffinity {
	a, _ := ParseClusterAffinity(p.Annotations[AnnotationAffinity])
	return a
}
