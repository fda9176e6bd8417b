// Package redirectpolicy turns Cilium's CiliumLocalRedirectPolicy
// (cilium.io/v2), as users write it, into redirects of frontends to pods
// on this node: a LocalRedirect frontend for an addressMatcher, or the
// ClusterIP frontends of a Service for a serviceMatcher.
//
// The types here are lbstate's own, following the published schema field
// for field, so that manifests written for Cilium decode strictly. Convert
// is a pure function of a policy and this node's pods. Cell is the
// policies' source: one Controller per feed (kubeapi.Feed: the API
// server, a manifests directory) writes the redirects through the Writer,
// as the feed's identity, and learns of the Services it redirects only
// through the tables (the Writer keeps a redirect beside its service).
package redirectpolicy

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The group, version and kind of a CiliumLocalRedirectPolicy.
const (
	Group   = "cilium.io"
	Version = "v2"
	Kind    = "CiliumLocalRedirectPolicy"
)

// SchemeGroupVersion is cilium.io/v2.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// AddToScheme registers the policy kind (and its list) in a scheme.
func AddToScheme(s *runtime.Scheme) error {
	// Our Go names are not Cilium's kind names.
	s.AddKnownTypeWithName(SchemeGroupVersion.WithKind(Kind), &Policy{})
	s.AddKnownTypeWithName(SchemeGroupVersion.WithKind(Kind+"List"), &PolicyList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}

// Policy is a CiliumLocalRedirectPolicy.
type Policy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              Spec `json:"spec"`
	// Status is Cilium's; lbstate neither reads nor writes it, but a
	// manifest exported from a cluster may carry it.
	Status json.RawMessage `json:"status,omitempty"`
}

// PolicyList is a list of policies, as the API serves them.
type PolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Policy `json:"items"`
}

// Spec says which traffic to redirect, and to which pods.
type Spec struct {
	RedirectFrontend Frontend `json:"redirectFrontend"`
	RedirectBackend  Backend  `json:"redirectBackend"`
	// SkipRedirectFromBackend leaves the traffic of the selected pods
	// themselves unredirected (a node-local DNS cache asking upstream).
	SkipRedirectFromBackend bool   `json:"skipRedirectFromBackend,omitempty"`
	Description             string `json:"description,omitempty"`
}

// Frontend has exactly one of its matchers.
type Frontend struct {
	AddressMatcher *AddressMatcher `json:"addressMatcher,omitempty"`
	ServiceMatcher *ServiceMatcher `json:"serviceMatcher,omitempty"`
}

// AddressMatcher redirects an address, whether or not a Service has it.
type AddressMatcher struct {
	IP      string     `json:"ip"`
	ToPorts []PortInfo `json:"toPorts"`
}

// ServiceMatcher redirects a Service's ClusterIP frontends: all its
// ports, or those listed.
type ServiceMatcher struct {
	ServiceName string     `json:"serviceName"`
	Namespace   string     `json:"namespace"`
	ToPorts     []PortInfo `json:"toPorts,omitempty"`
}

// Backend selects the pods, of the policy's namespace on this node, and
// the ports traffic goes to.
type Backend struct {
	LocalEndpointSelector metav1.LabelSelector `json:"localEndpointSelector"`
	ToPorts               []PortInfo           `json:"toPorts"`
}

// PortInfo is a port as the schema has it: the number as a string.
type PortInfo struct {
	Port     string `json:"port"`
	Protocol string `json:"protocol"`
	Name     string `json:"name,omitempty"`
}

// DeepCopyObject implements runtime.Object.
func (p *Policy) DeepCopyObject() runtime.Object { return p.DeepCopy() }

// DeepCopy returns a copy sharing nothing with p.
func (p *Policy) DeepCopy() *Policy {
	if p == nil {
		return nil
	}
	c := *p
	p.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	c.Status = append(json.RawMessage(nil), p.Status...)
	if m := p.Spec.RedirectFrontend.AddressMatcher; m != nil {
		c.Spec.RedirectFrontend.AddressMatcher = &AddressMatcher{IP: m.IP, ToPorts: append([]PortInfo(nil), m.ToPorts...)}
	}
	if m := p.Spec.RedirectFrontend.ServiceMatcher; m != nil {
		c.Spec.RedirectFrontend.ServiceMatcher = &ServiceMatcher{ServiceName: m.ServiceName, Namespace: m.Namespace,
			ToPorts: append([]PortInfo(nil), m.ToPorts...)}
	}
	p.Spec.RedirectBackend.LocalEndpointSelector.DeepCopyInto(&c.Spec.RedirectBackend.LocalEndpointSelector)
	c.Spec.RedirectBackend.ToPorts = append([]PortInfo(nil), p.Spec.RedirectBackend.ToPorts...)
	return &c
}

// DeepCopyObject implements runtime.Object.
func (l *PolicyList) DeepCopyObject() runtime.Object {
	c := &PolicyList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&c.ListMeta)
	for i := range l.Items {
		c.Items = append(c.Items, *l.Items[i].DeepCopy())
	}
	return c
}
