package k8s

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/lbstate/lbstate/lb"
)

const (
	// AnnotationProxyPort on a Service sends the new flows of its
	// frontends to the L7 proxy on each node listening on this port
	// (1-65535), instead of to a backend: lb.ProxyRedirect.
	AnnotationProxyPort = "lbstate.io/proxy-port"
	// AnnotationProxyPorts limits AnnotationProxyPort to the Service's
	// ports of these names: "http,grpc".
	AnnotationProxyPorts = "lbstate.io/proxy-ports"
)

// ConvertProxyRedirect returns the L7 proxy redirect a Service's
// annotations ask for (ok is false when they ask for none). An error
// names the Service and the annotation that is wrong.
func ConvertProxyRedirect(svc *corev1.Service, src lb.Source) (pr lb.ProxyRedirect, ok bool, err error) {
	fail := func(annotation string, err error) (lb.ProxyRedirect, bool, error) {
		name := lb.NewServiceName(svc.Namespace, svc.Name) // only now: most Services ask for none
		return lb.ProxyRedirect{}, false, fmt.Errorf("service %s: annotation %s: %w", name, annotation, err)
	}
	port, hasPort := svc.Annotations[AnnotationProxyPort]
	ports, hasPorts := svc.Annotations[AnnotationProxyPorts]
	if !hasPort {
		if hasPorts {
			return fail(AnnotationProxyPorts, fmt.Errorf("needs %s", AnnotationProxyPort))
		}
		return lb.ProxyRedirect{}, false, nil
	}
	n, err := strconv.ParseUint(strings.TrimSpace(port), 10, 16)
	if err != nil || n == 0 {
		return fail(AnnotationProxyPort, fmt.Errorf("%q is not a port (1-65535)", port))
	}
	if src == 0 {
		src = lb.SourceK8s
	}
	pr = lb.ProxyRedirect{Source: src, ProxyPort: uint16(n)}
	if hasPorts {
		for p := range strings.SplitSeq(ports, ",") {
			p = strings.TrimSpace(p)
			if !slices.ContainsFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool { return sp.Name == p }) {
				return fail(AnnotationProxyPorts, fmt.Errorf("%q is not the name of one of the Service's ports", p))
			}
			if !slices.Contains(pr.Ports, p) {
				pr.Ports = append(pr.Ports, p)
			}
		}
	}
	return pr, true, nil
}
