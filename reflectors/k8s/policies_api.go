package k8s

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/lbstate/lbstate/reflectors/redirectpolicy"
)

// policyHandler pushes policies read from unstructured objects.
func (r *Reflector) policyHandler() cache.ResourceEventHandler {
	return r.unstructuredHandler(func(u *unstructured.Unstructured, deleted bool) (any, error) {
		if deleted { // only the name matters
			return &redirectpolicy.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: u.GetNamespace(), Name: u.GetName()}}, nil
		}
		return redirectpolicy.FromUnstructured(u)
	})
}

// unstructuredHandler pushes what read makes of each unstructured object
// of a dynamic informer; one that does not read is reported, and its last
// good version stays in force.
func (r *Reflector) unstructuredHandler(read func(u *unstructured.Unstructured, deleted bool) (any, error)) cache.ResourceEventHandler {
	push := func(obj any, deleted bool) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		o, err := read(u, deleted)
		if err != nil {
			r.fail(err)
			return
		}
		r.Push(o, deleted)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { push(obj, false) },
		UpdateFunc: func(_, obj any) { push(obj, false) },
		DeleteFunc: func(obj any) { push(obj, true) },
	}
}
