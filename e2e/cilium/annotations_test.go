package cilium

import (
	"testing"

	"github.com/cilium/cilium/pkg/annotation"
	slim_metav1 "github.com/cilium/cilium/pkg/k8s/slim/k8s/apis/meta/v1"

	"github.com/lbstate/lbstate/lb"
)

// lbstate reads the clustermesh annotations as Cilium's
// GetAnnotationIncludeExternal and GetAnnotationShared read them, for
// every combination of the two keys, their aliases and values.
func TestAnnotationsReadAsCiliumReadsThem(t *testing.T) {
	values := []string{"", "true", "True", "false", "no", "yes"}
	keys := []string{lb.AnnotationGlobal, lb.AnnotationGlobalAlias, lb.AnnotationShared, lb.AnnotationSharedAlias}
	// Each key absent or set to one of the values: 7^4 combinations.
	n := 1
	for range keys {
		n *= len(values) + 1
	}
	for i := range n {
		ann := map[string]string{}
		for j, c := 0, i; j < len(keys); j, c = j+1, c/(len(values)+1) {
			if v := c % (len(values) + 1); v > 0 {
				ann[keys[j]] = values[v-1]
			}
		}
		obj := &slim_metav1.ObjectMeta{Annotations: ann}
		p := lb.ServiceParams{Annotations: ann}
		if got, want := p.IsGlobal(), annotation.GetAnnotationIncludeExternal(obj); got != want {
			t.Errorf("%v: global %v, Cilium %v", ann, got, want)
		}
		if got, want := p.IsShared(), annotation.GetAnnotationShared(obj); got != want {
			t.Errorf("%v: shared %v, Cilium %v", ann, got, want)
		}
	}
	for _, v := range []string{"local", "Remote", "none", ""} {
		for _, k := range []string{lb.AnnotationAffinity, lb.AnnotationAffinityAlias} {
			ann := map[string]string{lb.AnnotationGlobal: "true", k: v}
			want, err := annotation.GetAnnotationServiceAffinity(&slim_metav1.ObjectMeta{Annotations: ann})
			if err != nil {
				t.Fatal(err)
			}
			p := lb.ServiceParams{Annotations: ann}
			if got := p.ClusterAffinity(); got.String() != want && !(got == lb.AffinityNone && want == annotation.ServiceAffinityNone) {
				t.Errorf("%v: affinity %v, Cilium %q", ann, got, want)
			}
		}
	}
}
