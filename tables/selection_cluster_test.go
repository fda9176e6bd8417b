package tables

import (
	"slices"
	"testing"

	"github.com/lbstate/lbstate/lb"
)

func selRemote(id uint32) selOpt {
	return func(c *Candidate) { c.Remote, c.Params.ClusterID = true, id }
}

// Another cluster's backends join a service only where it is declared
// global here: a remote service alone never makes a local one take them.
func TestSelectBackendsTakesRemoteBackendsOnlyForGlobalServices(t *testing.T) {
	fe := selFE("10.96.0.1:80/TCP", lb.SVCTypeClusterIP, "")
	cands := selCands(selBE("10.0.0.1:80/TCP"), selBE("10.2.0.1:80/TCP", selRemote(2)))
	tests := []struct {
		name        string
		annotations map[string]string
		want        []string
	}{
		{"not annotated", nil, []string{"10.0.0.1:80/TCP"}},
		{"global false", map[string]string{lb.AnnotationGlobal: "false"}, []string{"10.0.0.1:80/TCP"}},
		{"global true", map[string]string{lb.AnnotationGlobal: "true"}, []string{"10.0.0.1:80/TCP", "10.2.0.1:80/TCP cluster=2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := &lb.ServiceParams{Annotations: tt.annotations}
			var got []string
			for _, r := range SelectBackends(fe, svc, nil, false, cands) {
				got = append(got, selRefString(r))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
