package lb

import (
	"fmt"
	"strings"
)

// Cilium's clustermesh annotations on a local Service, carried in
// ServiceParams.Annotations as the source found them. Each has an older
// io.cilium alias that Cilium still honours; the service.cilium.io key
// wins when both are set, as in Cilium's annotation.Get.
const (
	// AnnotationGlobal "true" (any case) makes a service global: it
	// takes the backends other clusters share for its namespace and
	// name, and offers its own unless AnnotationShared says otherwise.
	AnnotationGlobal      = "service.cilium.io/global"
	AnnotationGlobalAlias = "io.cilium/global-service"
	// AnnotationShared: a global service's backends are offered to other
	// clusters when it is absent or "true" (any case), and not when it is
	// anything else ("false", "no", ""). Ignored on a service that is not
	// global (the exporter's concern).
	AnnotationShared      = "service.cilium.io/shared"
	AnnotationSharedAlias = "io.cilium/shared-service"
	// AnnotationAffinity (local, remote, none) prefers one cluster's
	// backends of a global service.
	AnnotationAffinity      = "service.cilium.io/affinity"
	AnnotationAffinityAlias = "io.cilium/service-affinity"
)

// IsClustermeshAnnotation says whether key is one of the annotations
// above (or an alias): the sources carry these into
// ServiceParams.Annotations.
func IsClustermeshAnnotation(key string) bool {
	switch key {
	case AnnotationGlobal, AnnotationGlobalAlias, AnnotationShared, AnnotationSharedAlias,
		AnnotationAffinity, AnnotationAffinityAlias:
		return true
	}
	return false
}

// annotation is the value of key, or else of its alias.
func (p *ServiceParams) annotation(key, alias string) (string, bool) {
	if v, ok := p.Annotations[key]; ok {
		return v, true
	}
	v, ok := p.Annotations[alias]
	return v, ok
}

// IsGlobal reports whether the service takes other clusters' backends
// (Cilium's GetAnnotationIncludeExternal). Without it, backends a remote
// cluster offers are never selected: a remote service alone cannot make
// a local one global.
func (p *ServiceParams) IsGlobal() bool {
	v, _ := p.annotation(AnnotationGlobal, AnnotationGlobalAlias)
	return strings.EqualFold(v, "true")
}

// IsShared reports whether the service's own backends are offered to
// other clusters (Cilium's GetAnnotationShared): only a global service
// is shared, by default, and AnnotationShared keeps it shared only when
// it says "true".
func (p *ServiceParams) IsShared() bool {
	if !p.IsGlobal() {
		return false
	}
	v, ok := p.annotation(AnnotationShared, AnnotationSharedAlias)
	return !ok || strings.EqualFold(v, "true")
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

// ClusterAffinity returns the service's AnnotationAffinity (or its
// alias); an invalid
// value means none (the Kubernetes source drops it, logging and counting
// it). It matters only to a global service: no other has other
// clusters' backends.
func (p *ServiceParams) ClusterAffinity() ClusterAffinity {
	v, _ := p.annotation(AnnotationAffinity, AnnotationAffinityAlias)
	a, _ := ParseClusterAffinity(v)
	return a
}
