package k8s

import (
	"context"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/lbstate/lbstate/reflectors/redirectpolicy"
)

// policyCRDPoll is how often the API server is asked whether the
// CiliumLocalRedirectPolicy CRD has been installed, while it is not.
const policyCRDPoll = 30 * time.Second

// policyInformer returns an informer of CiliumLocalRedirectPolicies with
// the policy handler, or nil when the API server does not serve them yet:
// a watch of a missing resource would fail forever and the source never
// sync. Its absence is logged once; then watchPolicyCRD asks again, every
// r.crdPoll, without a word until it is there.
func (r *Reflector) policyInformer(ctx context.Context, dyn dynamic.Interface) (dynamicinformer.DynamicSharedInformerFactory, cache.ResourceEventHandlerRegistration, error) {
	_, err := dyn.Resource(redirectpolicy.Resource).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, nil, err
	}
	f := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	reg, err := f.ForResource(redirectpolicy.Resource).Informer().AddEventHandler(r.policyHandler())
	if err != nil {
		return nil, nil, err
	}
	f.Start(ctx.Done())
	return f, reg, nil
}

// watchPolicyCRD waits for the CRD to be installed, then watches
// policies until ctx is done.
func (r *Reflector) watchPolicyCRD(ctx context.Context, dyn dynamic.Interface) {
	tick := time.NewTicker(r.crdPoll)
	defer tick.Stop()
	lastErr := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		f, _, err := r.policyInformer(ctx, dyn)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			if err.Error() != lastErr { // once per new error, not at every poll
				lastErr = err.Error()
				r.src.Log().Warn("Checking for the CiliumLocalRedirectPolicy CRD", slog.Any("error", err))
			}
			continue
		}
		r.src.Log().Info("CiliumLocalRedirectPolicy CRD installed: watching local redirect policies",
			slog.String("resource", redirectpolicy.Resource.String()))
		<-ctx.Done()
		f.Shutdown()
		return
	}
}

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
