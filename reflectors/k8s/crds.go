package k8s

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/lbstate/lbstate/reflectors/kubeapi"
	"github.com/lbstate/lbstate/reflectors/routes"
)

// crdKinds are the CRD-backed kinds the reflector reads (the Gateway
// API's routes and ReferenceGrant, SMI TrafficSplit): a feed of an API
// server watches each while it serves its CRD.
func crdKinds() []kubeapi.FeedKind {
	var kinds []kubeapi.FeedKind
	for _, res := range routes.Resources {
		kinds = append(kinds, kubeapi.CRDKind(res.Kind, res.Versions, routes.AddToScheme, readRoute))
	}
	return kinds
}

func readRoute(u *unstructured.Unstructured, _ bool) (runtime.Object, error) {
	return routes.FromUnstructured(u)
}

// FakeCRDs returns the CustomResourceDefinitions of the CRD-backed kinds
// the reflector reads, for a fake dynamic client (kubeapi.FakeCRDs).
func FakeCRDs() []runtime.Object { return kubeapi.FakeCRDs(crdKinds()...) }
