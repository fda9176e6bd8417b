package k8s

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lbstate/lbstate/reflectors/kubeapi"
	"github.com/lbstate/lbstate/reflectors/redirectpolicy"
	"github.com/lbstate/lbstate/reflectors/routes"
)

// crdKinds are the CRD-backed kinds the reflector reads from a dynamic
// client, each with its handler: kubeapi.CRDs watches each while the API
// server serves its CRD.
func (r *Reflector) crdKinds() []kubeapi.Kind {
	kinds := crdResources()
	for i := range kinds {
		if kinds[i].Name == redirectpolicy.Kind {
			kinds[i].Handler = r.policyHandler()
		} else {
			kinds[i].Handler = r.routeHandler()
		}
	}
	return kinds
}

// crdResources are crdKinds without their handlers.
func crdResources() []kubeapi.Kind {
	kinds := []kubeapi.Kind{{Name: redirectpolicy.Kind, Versions: []schema.GroupVersionResource{redirectpolicy.Resource}}}
	for _, res := range routes.Resources {
		kinds = append(kinds, kubeapi.Kind{Name: res.Kind, Versions: res.Versions})
	}
	return kinds
}

// FakeCRDs returns the CustomResourceDefinitions of the kinds WatchClients
// reads from a dynamic client, Established in every version it reads, for
// a fake dynamic client to serve (with kubeapi.CRDListKinds): a kind is
// watched only while its CRD is.
func FakeCRDs() []runtime.Object {
	var crds []runtime.Object
	for _, k := range crdResources() {
		var versions []string
		for _, v := range k.Versions {
			versions = append(versions, v.Version)
		}
		crds = append(crds, kubeapi.CRDObject(k.Versions[0], k.Name, true, versions...))
	}
	return crds
}
