package lb

import "strings"

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
