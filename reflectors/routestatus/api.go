package routestatus

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/pager"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/lbstate/lbstate/reflectors/routes"
)

// hasStatus are the kinds whose status.parents lbstate writes (SMI's
// TrafficSplit has no status).
var hasStatus = map[string]bool{"HTTPRoute": true, "GRPCRoute": true, "TCPRoute": true, "UDPRoute": true}

// api reads and writes routes through a dynamic client, in the first
// version of each kind the API server serves (routes.Resources' order;
// the API server converts status between a CRD's versions).
type api struct {
	dyn dynamic.Interface

	mu     sync.Mutex
	served map[string]schema.GroupVersionResource // kind: the version last found
}

func newAPI(dyn dynamic.Interface) *api {
	return &api{dyn: dyn, served: map[string]schema.GroupVersionResource{}}
}

// get returns the route, and the resource it was read from; a NotFound
// error when no version has it.
func (a *api) get(ctx context.Context, key routes.Key) (*unstructured.Unstructured, schema.GroupVersionResource, error) {
	a.mu.Lock()
	last, ok := a.served[key.Kind]
	a.mu.Unlock()
	var versions []schema.GroupVersionResource
	if ok {
		versions = append(versions, last)
	}
	for _, r := range routes.Resources {
		if r.Kind == key.Kind {
			versions = append(versions, r.Versions...)
		}
	}
	var err error = apierrors.NewNotFound(schema.GroupResource{Group: routes.GatewayGroup, Resource: key.Kind}, key.Name)
	for _, gvr := range versions {
		var u *unstructured.Unstructured
		u, err = a.dyn.Resource(gvr).Namespace(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
		if err == nil {
			a.mu.Lock()
			a.served[key.Kind] = gvr
			a.mu.Unlock()
			return u, gvr, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, gvr, err
		}
	}
	return nil, schema.GroupVersionResource{}, err
}

// updateStatus writes u's status (u as get returned it: its
// resourceVersion makes a concurrent change a Conflict).
func (a *api) updateStatus(ctx context.Context, gvr schema.GroupVersionResource, u *unstructured.Unstructured) error {
	_, err := a.dyn.Resource(gvr).Namespace(u.GetNamespace()).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	return err
}

// parentsOf reads u's status.parents.
func parentsOf(u *unstructured.Unstructured) ([]gwv1.RouteParentStatus, error) {
	status, ok := u.Object["status"].(map[string]any)
	if !ok {
		return nil, nil
	}
	var st gwv1.RouteStatus
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(status, &st); err != nil {
		return nil, fmt.Errorf("%s %s/%s: status: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return st.Parents, nil
}

// setParents replaces u's status.parents, keeping the rest of its status.
func setParents(u *unstructured.Unstructured, parents []gwv1.RouteParentStatus) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&gwv1.RouteStatus{Parents: parents})
	if err != nil {
		return err
	}
	status, _ := u.Object["status"].(map[string]any)
	if status == nil {
		status = map[string]any{}
	}
	if m["parents"] == nil {
		m["parents"] = []any{}
	}
	status["parents"] = m["parents"]
	u.Object["status"] = status
	return nil
}

// eachRoute calls fn with every route of kind, in the first version
// served, listed a page at a time; a NotFound error when no version is.
func (a *api) eachRoute(ctx context.Context, kind string, fn func(*unstructured.Unstructured, schema.GroupVersionResource)) error {
	var err error = apierrors.NewNotFound(schema.GroupResource{Group: routes.GatewayGroup, Resource: kind}, "")
	for _, r := range routes.Resources {
		if r.Kind != kind {
			continue
		}
		for _, gvr := range r.Versions {
			p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				return a.dyn.Resource(gvr).List(ctx, opts)
			})
			err = p.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
				if u, ok := obj.(*unstructured.Unstructured); ok {
					fn(u, gvr)
				}
				return nil
			})
			if !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	return err
}
