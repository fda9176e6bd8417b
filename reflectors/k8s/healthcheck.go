package k8s

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/lbstate/lbstate/lb"
)

// AnnotationHealthCheckPrefix starts the Service annotations that
// configure health checking (lbstate.io/health-check,
// lbstate.io/health-check-path, ...). Conversion carries them into
// lb.ServiceParams.Annotations as they are: the health checker parses
// them and reports a bad value itself, so that one does not reject the
// Service.
const AnnotationHealthCheckPrefix = "lbstate.io/health-check"

// carriedAnnotations returns the Service's annotations that other parts
// read (health checking's, and clustermesh's: lb.IsClustermeshAnnotation),
// or nil if it has none.
func carriedAnnotations(svc *corev1.Service) map[string]string {
	var out map[string]string
	for k, v := range svc.Annotations {
		switch {
		case strings.HasPrefix(k, AnnotationHealthCheckPrefix),
			lb.IsClustermeshAnnotation(k):
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}
