package kubeapi

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// CRDResource is the API server's CustomResourceDefinitions, which CRDs
// watches as unstructured objects (no apiextensions client needed).
var CRDResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// CRDListKinds is the list kind a fake dynamic client needs to serve
// CRDResource (k8s.io/client-go/dynamic/fake).
var CRDListKinds = map[schema.GroupVersionResource]string{CRDResource: "CustomResourceDefinitionList"}

// crd is what CRDs keeps of a CustomResourceDefinition: a CRD object
// carries its whole OpenAPI schema (the Gateway API's HTTPRoute CRD is
// several hundred KB), of which a kind's watch needs three facts.
type crd struct {
	metav1.TypeMeta
	metav1.ObjectMeta // name and resource version only
	Established       bool
	Served            []string // the versions the CRD serves
}

// serves returns the first of versions the CRD serves, once Established
// (before that the API server does not serve it, whatever its spec
// says).
func (c *crd) serves(versions []schema.GroupVersionResource) (schema.GroupVersionResource, bool) {
	if c == nil || !c.Established {
		return schema.GroupVersionResource{}, false
	}
	for _, v := range versions {
		if slices.Contains(c.Served, v.Version) {
			return v, true
		}
	}
	return schema.GroupVersionResource{}, false
}

func (c *crd) DeepCopyObject() runtime.Object {
	out := *c
	out.ObjectMeta = *c.ObjectMeta.DeepCopy()
	out.Served = slices.Clone(c.Served)
	return &out
}

// slimCRD is the CRD informer's transform: it keeps a crd of each
// object. Fields of an unexpected shape read as absent (not served, not
// established), never as an error, which would stall the informer.
func slimCRD(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil // a crd already, or what the informer passes through
	}
	c := &crd{ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), ResourceVersion: u.GetResourceVersion(), UID: u.GetUID()}}
	// NoCopy: NestedSlice would deep-copy every version's schema.
	versions, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "versions")
	vs, _ := versions.([]any)
	for _, v := range vs {
		m, _ := v.(map[string]any)
		name, _ := m["name"].(string)
		if served, _ := m["served"].(bool); served && name != "" {
			c.Served = append(c.Served, name)
		}
	}
	conditions, _, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "conditions")
	cs, _ := conditions.([]any)
	for _, cond := range cs {
		m, _ := cond.(map[string]any)
		if m["type"] == "Established" {
			c.Established = m["status"] == string(metav1.ConditionTrue)
		}
	}
	return c, nil
}

// CRDObject returns the CustomResourceDefinition of resource's group and
// resource, as an API server shows it: serving the given versions, and,
// if established, with the Established condition true. Only the fields
// CRDs reads are filled in: it is for fake dynamic clients (tests and
// script environments), where nothing installs or establishes CRDs.
func CRDObject(resource schema.GroupVersionResource, kind string, established bool, served ...string) *unstructured.Unstructured {
	var versions []any
	for i, v := range served {
		versions = append(versions, map[string]any{"name": v, "served": true, "storage": i == 0})
	}
	status := string(metav1.ConditionFalse)
	if established {
		status = string(metav1.ConditionTrue)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": CRDResource.GroupVersion().String(),
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": resource.Resource + "." + resource.Group},
		"spec": map[string]any{
			"group":    resource.Group,
			"names":    map[string]any{"plural": resource.Resource, "kind": kind, "listKind": kind + "List"},
			"scope":    "Namespaced",
			"versions": versions,
		},
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Established", "status": status},
		}},
	}}
}

var _ runtime.Object = (*crd)(nil)

// FakeCRDs returns the CustomResourceDefinitions of CRD-backed kinds,
// Established in every version of each, for a fake dynamic client to
// serve (with CRDListKinds and the kinds' own list kinds): a kind is
// watched only while its CRD is.
func FakeCRDs(kinds ...FeedKind) []runtime.Object {
	var crds []runtime.Object
	for _, k := range kinds {
		if !k.IsCRD() {
			continue
		}
		var versions []string
		for _, v := range k.versions {
			versions = append(versions, v.Version)
		}
		crds = append(crds, CRDObject(k.versions[0], k.Kind, true, versions...))
	}
	return crds
}
