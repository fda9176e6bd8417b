package k8s

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// AnnotationHealthCheckPrefix starts the Service annotations that
// configure health checking (lbstate.io/health-check,
// lbstate.io/health-check-path, ...). Conversion carries them into
// lb.ServiceParams.Annotations as they are: the health checker parses
// them and reports a bad value itself, so that one does not reject the
// Service.
const AnnotationHealthCheckPrefix = "lbstate.io/health-check"

// healthCheckAnnotations returns the Service's health-check annotations,
// or nil if it has none.
func healthCheckAnnotations(svc *corev1.Service) map[string]string {
	var out map[string]string
	for k, v := range svc.Annotations {
		if strings.HasPrefix(k, AnnotationHealthCheckPrefix) {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}
