package routes

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Resource is one kind Read reads, as an API server serves it: the
// versions to try, preferred first (a cluster serves whichever its CRDs
// install).
type Resource struct {
	Kind     string
	Versions []schema.GroupVersionResource
}

func gvrs(group, resource string, versions ...string) []schema.GroupVersionResource {
	out := make([]schema.GroupVersionResource, len(versions))
	for i, v := range versions {
		out[i] = schema.GroupVersionResource{Group: group, Version: v, Resource: resource}
	}
	return out
}

// Resources are the kinds a dynamic client watches for routes.
var Resources = []Resource{
	{"HTTPRoute", gvrs(GatewayGroup, "httproutes", "v1", "v1beta1")},
	{"GRPCRoute", gvrs(GatewayGroup, "grpcroutes", "v1", "v1alpha2")},
	{"TCPRoute", gvrs(GatewayGroup, "tcproutes", "v1", "v1alpha2")},
	{"UDPRoute", gvrs(GatewayGroup, "udproutes", "v1", "v1alpha2")},
	{"ReferenceGrant", gvrs(GatewayGroup, "referencegrants", "v1", "v1beta1")},
	{"TrafficSplit", gvrs(SMIGroup, "trafficsplits", SMIVersions...)},
}

// ResourceList is the list kind of every version of Resources, which a
// fake dynamic client needs to serve them (k8s.io/client-go/dynamic/fake).
var ResourceList = func() map[schema.GroupVersionResource]string {
	m := map[schema.GroupVersionResource]string{}
	for _, r := range Resources {
		for _, v := range r.Versions {
			m[v] = r.Kind + "List"
		}
	}
	return m
}()

// FromUnstructured reads an object a dynamic client returns into the type
// Read and ReadGrant take (the Gateway API's v1 types; ours for
// TrafficSplit). Unknown fields are ignored: the API server pruned what
// its CRD does not know.
func FromUnstructured(u *unstructured.Unstructured) (runtime.Object, error) {
	var obj runtime.Object
	switch u.GetKind() {
	case "HTTPRoute":
		obj = &gwv1.HTTPRoute{}
	case "GRPCRoute":
		obj = &gwv1.GRPCRoute{}
	case "TCPRoute":
		obj = &gwv1.TCPRoute{}
	case "UDPRoute":
		obj = &gwv1.UDPRoute{}
	case "ReferenceGrant":
		obj = &gwv1.ReferenceGrant{}
	case "TrafficSplit":
		obj = &TrafficSplit{}
	default:
		return nil, fmt.Errorf("%s %s/%s: not a route kind", u.GetKind(), u.GetNamespace(), u.GetName())
	}
	if err := convert(u.Object, obj); err != nil {
		return nil, fmt.Errorf("%s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return obj, nil
}

// ResourceOf returns the resource to write obj to (for tests and the
// k8s/add script command): the preferred version of its kind, which
// WatchClients watches when it is served. (An API server converts
// between a CRD's versions; a fake dynamic client keeps each apart.)
func ResourceOf(obj runtime.Object) (schema.GroupVersionResource, bool) {
	key, ok := KeyOf(obj)
	if !ok {
		return schema.GroupVersionResource{}, false
	}
	for _, r := range Resources {
		if r.Kind == key.Kind {
			return r.Versions[0], true
		}
	}
	return schema.GroupVersionResource{}, false
}
