package k8s

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/lbstate/lbstate/lb"
)

// AnnotationTopologyKeys on a Service lists node label keys to prefer
// backends by, in order (lb.ServiceParams.TopologyKeys):
// "kubernetes.io/hostname,topology.kubernetes.io/zone,*".
const AnnotationTopologyKeys = "lbstate.io/topology-keys"

// ConvertTopologyKeys reads a Service's AnnotationTopologyKeys: the keys,
// or nil without the annotation. replaces is true when the Service also
// asks for a traffic distribution (trafficDistribution, or the
// topology-mode annotation), which the keys replace.
//
// It is apart from ConvertService because a bad list (an empty key, more
// than lb.MaxTopologyKeys, "*" not last, a key twice) is an error of the
// annotation alone: the error names the Service and the annotation, and
// the Service is to be declared as without it.
func ConvertTopologyKeys(svc *corev1.Service) (keys []string, replaces bool, err error) {
	v, found := svc.Annotations[AnnotationTopologyKeys]
	if !found {
		return nil, false, nil
	}
	keys, err = lb.ParseTopologyKeys(v)
	if err != nil {
		return nil, false, fmt.Errorf("service %s/%s: annotation %s: %q: %w", svc.Namespace, svc.Name, AnnotationTopologyKeys, v, err)
	}
	td := svc.Spec.TrafficDistribution != nil && *svc.Spec.TrafficDistribution != ""
	for _, a := range []string{AnnotationTopologyMode, AnnotationTopologyAwareHints} {
		td = td || svc.Annotations[a] != ""
	}
	return keys, td, nil
}

// topologyKeys returns the topology keys of a Service for its
// declaration. A bad annotation is reported (logged and counted) and a
// Service that also asks for a traffic distribution is logged, each once
// while it stays so: every change of the node converts every Service
// again.
func (r *Reflector) topologyKeys(name lb.ServiceName, svc *corev1.Service) []string {
	keys, replaces, err := ConvertTopologyKeys(svc)
	note := ""
	switch {
	case err != nil:
		note = err.Error()
	case replaces:
		note = "replaces"
	}
	if r.topologyNoted == nil {
		r.topologyNoted = map[lb.ServiceName]string{}
	}
	if r.topologyNoted[name] != note {
		switch {
		case err != nil:
			r.failAt(svc, err)
		case replaces:
			r.src.Log().Info("Topology keys replace the Service's traffic distribution",
				"service", name, "annotation", AnnotationTopologyKeys, "keys", keys)
		}
	}
	if note == "" {
		delete(r.topologyNoted, name)
	} else {
		r.topologyNoted[name] = note
	}
	return keys
}
