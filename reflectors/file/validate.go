package file

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// fieldError is a value of an object's field that lbstate does not know.
type fieldError struct{ path, msg string }

// validate checks the enumerated fields lbstate reads, as the API server
// would: a misspelt value must be an error, not the default it would
// otherwise become. (Objects from an API server were validated there;
// this is for manifests nobody else checked.)
func validate(obj runtime.Object) []fieldError {
	var v validator
	switch o := obj.(type) {
	case *corev1.Service:
		s := o.Spec
		oneOf(&v, "spec.type", string(s.Type), corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeExternalName)
		oneOf(&v, "spec.externalTrafficPolicy", string(s.ExternalTrafficPolicy), corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal)
		oneOf(&v, "spec.internalTrafficPolicy", deref(s.InternalTrafficPolicy), corev1.ServiceInternalTrafficPolicyCluster, corev1.ServiceInternalTrafficPolicyLocal)
		oneOf(&v, "spec.sessionAffinity", string(s.SessionAffinity), corev1.ServiceAffinityNone, corev1.ServiceAffinityClientIP)
		oneOf(&v, "spec.ipFamilyPolicy", deref(s.IPFamilyPolicy), corev1.IPFamilyPolicySingleStack, corev1.IPFamilyPolicyPreferDualStack, corev1.IPFamilyPolicyRequireDualStack)
		for i, f := range s.IPFamilies {
			oneOf(&v, fmt.Sprintf("spec.ipFamilies[%d]", i), string(f), corev1.IPv4Protocol, corev1.IPv6Protocol)
		}
		oneOf(&v, "spec.trafficDistribution", deref(s.TrafficDistribution), corev1.ServiceTrafficDistributionPreferClose,
			corev1.ServiceTrafficDistributionPreferSameZone, corev1.ServiceTrafficDistributionPreferSameNode)
		for i, p := range s.Ports {
			v.protocol(fmt.Sprintf("spec.ports[%d].protocol", i), string(p.Protocol))
		}
		for i, ing := range o.Status.LoadBalancer.Ingress {
			oneOf(&v, fmt.Sprintf("status.loadBalancer.ingress[%d].ipMode", i), deref(ing.IPMode), corev1.LoadBalancerIPModeVIP, corev1.LoadBalancerIPModeProxy)
		}
	case *discoveryv1.EndpointSlice:
		oneOf(&v, "addressType", string(o.AddressType), discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN)
		for i, p := range o.Ports {
			v.protocol(fmt.Sprintf("ports[%d].protocol", i), deref(p.Protocol))
		}
	case *corev1.Pod:
		for i, c := range o.Spec.Containers {
			for j, p := range c.Ports {
				v.protocol(fmt.Sprintf("spec.containers[%d].ports[%d].protocol", i, j), string(p.Protocol))
			}
		}
	}
	return v.errs
}

type validator struct{ errs []fieldError }

// oneOf checks that a value, if given, is one of allowed.
func oneOf[T ~string](v *validator, path, value string, allowed ...T) {
	if value == "" || slices.Contains(allowed, T(value)) {
		return
	}
	want := make([]string, len(allowed))
	for i, a := range allowed {
		want[i] = string(a)
	}
	list := strings.Join(want[:len(want)-1], ", ") + " or " + want[len(want)-1]
	v.errs = append(v.errs, fieldError{path, fmt.Sprintf("unsupported value %q (want %s)", value, list)})
}

func (v *validator) protocol(path, value string) {
	oneOf(v, path, value, corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP)
}

func deref[T ~string](p *T) string {
	if p == nil {
		return ""
	}
	return string(*p)
}

// fieldLine returns the line (of doc, from 1) of the field at path
// ("spec.ports[0].protocol"), or of the deepest part of the path that is
// there.
func fieldLine(doc []byte, path string) int {
	var root yaml.Node
	if yaml.Unmarshal(doc, &root) != nil || len(root.Content) == 0 {
		return 1
	}
	n := root.Content[0]
	line := n.Line
	for _, part := range strings.Split(path, ".") {
		name, rest, _ := strings.Cut(part, "[")
		if n = child(n, name); n == nil {
			return line
		}
		line = n.Line
		for rest != "" {
			var index string
			index, rest, _ = strings.Cut(rest, "]")
			rest = strings.TrimPrefix(rest, "[")
			i, err := strconv.Atoi(index)
			if err != nil || n.Kind != yaml.SequenceNode || i >= len(n.Content) {
				return line
			}
			n = n.Content[i]
			line = n.Line
		}
	}
	return line
}

// child returns the value of key in a mapping node, positioned at the
// key's line; nil if it has none.
func child(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			v := *n.Content[i+1]
			v.Line = n.Content[i].Line
			return &v
		}
	}
	return nil
}
