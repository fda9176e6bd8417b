package lb

import "testing"

// The clustermesh annotations read as Cilium's GetAnnotationIncludeExternal
// and GetAnnotationShared read them: "true" in any case, the
// service.cilium.io key before its io.cilium alias, shared by default
// but only when global, and anything but "true" not shared. (The
// Cilium-code suite in e2e/cilium checks this table against Cilium's
// own functions.)
func TestClustermeshAnnotationsReadAsCilium(t *testing.T) {
	for _, tc := range []struct {
		ann            map[string]string
		global, shared bool
	}{
		{nil, false, false},
		{map[string]string{AnnotationGlobal: "true"}, true, true},
		{map[string]string{AnnotationGlobal: "TRUE"}, true, true},
		{map[string]string{AnnotationGlobal: "yes"}, false, false},
		{map[string]string{AnnotationGlobalAlias: "true"}, true, true},
		{map[string]string{AnnotationGlobal: "false", AnnotationGlobalAlias: "true"}, false, false},
		{map[string]string{AnnotationGlobal: "true", AnnotationShared: "false"}, true, false},
		{map[string]string{AnnotationGlobal: "true", AnnotationShared: "no"}, true, false},
		{map[string]string{AnnotationGlobal: "true", AnnotationShared: ""}, true, false},
		{map[string]string{AnnotationGlobal: "true", AnnotationShared: "True"}, true, true},
		{map[string]string{AnnotationGlobal: "true", AnnotationSharedAlias: "false"}, true, false},
		{map[string]string{AnnotationGlobal: "true", AnnotationShared: "true", AnnotationSharedAlias: "false"}, true, true},
		{map[string]string{AnnotationShared: "true"}, false, false},
	} {
		p := ServiceParams{Annotations: tc.ann}
		if p.IsGlobal() != tc.global || p.IsShared() != tc.shared {
			t.Errorf("%v: global %v shared %v, want %v %v", tc.ann, p.IsGlobal(), p.IsShared(), tc.global, tc.shared)
		}
	}
	p := ServiceParams{Annotations: map[string]string{AnnotationGlobal: "true", AnnotationAffinityAlias: "Local"}}
	if p.ClusterAffinity() != AffinityLocal {
		t.Errorf("affinity by its alias: %v", p.ClusterAffinity())
	}
}
