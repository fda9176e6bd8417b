package k8s

import (
	"context"
	"log/slog"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/lbstate/lbstate/reflectors/redirectpolicy"
)

// policyInformer returns an informer of CiliumLocalRedirectPolicies, or
// nil when the API server does not serve them: without the CRD a watch
// would fail forever and the source never sync, so its absence is
// logged once and policies stay off until the agent restarts.
func (r *Reflector) policyInformer(ctx context.Context, dyn dynamic.Interface) (dynamicinformer.DynamicSharedInformerFactory, cache.SharedIndexInformer, error) {
	_, err := dyn.Resource(redirectpolicy.Resource).List(ctx, metav1.ListOptions{Limit: 1})
	switch {
	case apierrors.IsNotFound(err):
		r.src.Log().Info("CiliumLocalRedirectPolicy CRD not installed: local redirect policies are off",
			slog.String("resource", redirectpolicy.Resource.String()))
		return nil, nil, nil
	case err != nil:
		return nil, nil, err
	}
	f := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	return f, f.ForResource(redirectpolicy.Resource).Informer(), nil
}

// policyHandler pushes policies read from unstructured objects; one that
// does not read is reported, and its last good version stays in force.
func (r *Reflector) policyHandler() cache.ResourceEventHandler {
	push := func(obj any, deleted bool) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		if deleted { // only the name matters
			r.Push(&redirectpolicy.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: u.GetNamespace(), Name: u.GetName()}}, true)
			return
		}
		p, err := redirectpolicy.FromUnstructured(u)
		if err != nil {
			r.fail(err)
			return
		}
		r.Push(p, false)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { push(obj, false) },
		UpdateFunc: func(_, obj any) { push(obj, false) },
		DeleteFunc: func(obj any) { push(obj, true) },
	}
}
