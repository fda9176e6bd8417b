package k8s

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lbstate/lbstate/reflectors/kubeapi"
	"github.com/lbstate/lbstate/reflectors/redirectpolicy"
	"github.com/lbstate/lbstate/reflectors/routes"
)

// crdKinds are the CRD-backed kinds the reflector reads: a feed of an API
// server watches each while it serves its CRD.
func crdKinds() []kubeapi.FeedKind {
	kinds := []kubeapi.FeedKind{kubeapi.CRDKind(redirectpolicy.Kind, []schema.GroupVersionResource{redirectpolicy.Resource},
		redirectpolicy.AddToScheme, readPolicy)}
	for _, res := range routes.Resources {
		kinds = append(kinds, kubeapi.CRDKind(res.Kind, res.Versions, routes.AddToScheme, readRoute))
	}
	return kinds
}

// readPolicy reads a policy from the API server; of a deleted one, only
// the name matters.
func readPolicy(u *unstructured.Unstructured, deleted bool) (runtime.Object, error) {
	if deleted {
		return &redirectpolicy.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: u.GetNamespace(), Name: u.GetName()}}, nil
	}
	return redirectpolicy.FromUnstructured(u)
}

func readRoute(u *unstructured.Unstructured, _ bool) (runtime.Object, error) {
	return routes.FromUnstructured(u)
}

// FakeCRDs returns the CustomResourceDefinitions of the kinds the
// reflector reads from a dynamic client, Established in every version it
// reads, for a fake dynamic client to serve (with kubeapi.CRDListKinds):
// a kind is watched only while its CRD is.
func FakeCRDs() []runtime.Object {
	var crds []runtime.Object
	for _, k := range crdKinds() {
		var versions []string
		for _, v := range k.Versions() {
			versions = append(versions, v.Version)
		}
		crds = append(crds, kubeapi.CRDObject(k.Versions()[0], k.Kind, true, versions...))
	}
	return crds
}
