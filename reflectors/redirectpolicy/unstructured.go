package redirectpolicy

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Resource is the API resource of CiliumLocalRedirectPolicies, which a
// dynamic client lists and watches.
var Resource = SchemeGroupVersion.WithResource("ciliumlocalredirectpolicies")

// ResourceList is the list kind a fake dynamic client needs to serve
// Resource (k8s.io/client-go/dynamic/fake).
var ResourceList = map[schema.GroupVersionResource]string{Resource: Kind + "List"}

// FromUnstructured reads a policy as a dynamic client returns it. Unknown
// fields are ignored, not errors: the API server has pruned what its CRD
// does not know, and a newer CRD may know more than these types.
func FromUnstructured(u *unstructured.Unstructured) (*Policy, error) {
	data, err := json.Marshal(u.Object)
	if err != nil {
		return nil, fmt.Errorf("policy %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	p := &Policy{}
	if err := json.Unmarshal(data, p); err != nil {
		return nil, fmt.Errorf("policy %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return p, nil
}
