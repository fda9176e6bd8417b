package routes

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SMIGroup is the group of SMI's TrafficSplit; SMIVersions the versions
// lbstate reads, newest first. (v1alpha1 weighed backends with resource
// quantities and is not read.)
const SMIGroup = "split.smi-spec.io"

var SMIVersions = []string{"v1alpha4", "v1alpha3", "v1alpha2"}

// TrafficSplit is SMI's TrafficSplit, in lbstate's own types: the fields
// of v1alpha2 through v1alpha4, which differ only in what v1alpha2 lacks
// (matches).
type TrafficSplit struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              TrafficSplitSpec `json:"spec"`
}

// TrafficSplitSpec: the apex service, split across backends by weight.
type TrafficSplitSpec struct {
	// Service is the apex: the service clients address.
	Service  string                `json:"service"`
	Backends []TrafficSplitBackend `json:"backends"`
	// Matches (v1alpha3 and later) limit the split to HTTP requests of
	// HTTPRouteGroups, which L4 cannot tell apart: a split with matches
	// is reported and not applied.
	Matches []TrafficSplitMatch `json:"matches,omitempty"`
}

// TrafficSplitBackend is one service of the split and its weight.
type TrafficSplitBackend struct {
	Service string `json:"service"`
	Weight  int64  `json:"weight"`
}

// TrafficSplitMatch names the object whose requests the split covers.
type TrafficSplitMatch struct {
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	APIGroup string `json:"apiGroup,omitempty"`
}

// TrafficSplitList is a list of splits, as the API serves them.
type TrafficSplitList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TrafficSplit `json:"items"`
}

// AddSMIToScheme registers TrafficSplit in every version lbstate reads.
func AddSMIToScheme(s *runtime.Scheme) error {
	for _, v := range SMIVersions {
		gv := schema.GroupVersion{Group: SMIGroup, Version: v}
		s.AddKnownTypeWithName(gv.WithKind("TrafficSplit"), &TrafficSplit{})
		s.AddKnownTypeWithName(gv.WithKind("TrafficSplitList"), &TrafficSplitList{})
		metav1.AddToGroupVersion(s, gv)
	}
	return nil
}

func (t *TrafficSplit) DeepCopyObject() runtime.Object {
	c := *t
	t.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	c.Spec.Backends = append([]TrafficSplitBackend(nil), t.Spec.Backends...)
	c.Spec.Matches = append([]TrafficSplitMatch(nil), t.Spec.Matches...)
	return &c
}

func (l *TrafficSplitList) DeepCopyObject() runtime.Object {
	c := *l
	c.Items = make([]TrafficSplit, len(l.Items))
	for i := range l.Items {
		c.Items[i] = *l.Items[i].DeepCopyObject().(*TrafficSplit)
	}
	return &c
}
