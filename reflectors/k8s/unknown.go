package k8s

import (
	"fmt"
	"slices"

	"github.com/lbstate/lbstate/lb"
)

// UnknownValue is a value of an evolving Kubernetes field (one whose set
// of values Kubernetes keeps extending: trafficDistribution gained
// PreferSameZone and PreferSameNode in 1.33) that this version of lbstate
// does not know. The conversion used the field's default instead, as the
// API asks of implementations older than the cluster, so that a Service
// keeps working across an upgrade instead of being dropped.
//
// It is not an error of the object: the Kubernetes source logs each at
// INFO, once per Service until its unknown values change. A caller that
// must reject misspelt values (a manifests directory validated as kubectl
// --validate would) can return it as an error: it implements error.
type UnknownValue struct {
	// Object names the object, as errors do: "service default/web".
	Object string
	// Field is the field's path: "spec.trafficDistribution",
	// "annotation lbstate.io/algorithm".
	Field string
	Value string
	// Default is what the conversion used instead: "no preference".
	Default string
}

func (u UnknownValue) Error() string {
	return fmt.Sprintf("%s: %s: unknown value %q, using %s", u.Object, u.Field, u.Value, u.Default)
}

// unknownValues collects the unknown values of one object's evolving
// fields.
type unknownValues struct {
	service lb.ServiceName // the object, named only when a value is unknown
	list    []UnknownValue
}

// oneOf returns value if it is one of known, or else records it as
// unknown and returns def.
func (u *unknownValues) oneOf(field, value, def string, known ...string) string {
	if slices.Contains(known, value) {
		return value
	}
	u.add(field, value, def)
	return def
}

func (u *unknownValues) add(field, value, def string) {
	u.list = append(u.list, UnknownValue{Object: "service " + u.service.String(), Field: field, Value: value, Default: def})
}

// logUnknown logs and counts (Source.Unknown) the unknown values of a
// Service's evolving fields, each once: again only after the Service stopped having it (every
// change of the node converts every Service again).
func (r *Reflector) logUnknown(name lb.ServiceName, unknown []UnknownValue) {
	logged := r.unknown[name]
	if slices.Equal(logged, unknown) {
		return
	}
	for _, u := range unknown {
		if !slices.Contains(logged, u) {
			r.src.Unknown(u.Object, u.Field, u.Value, u.Default)
		}
	}
	if len(unknown) == 0 {
		delete(r.unknown, name)
	} else {
		r.unknown[name] = unknown
	}
}
