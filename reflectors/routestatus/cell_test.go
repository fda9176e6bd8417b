package routestatus_test

import (
	"context"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/lbstate/lbstate/reflectors/k8s"
	"github.com/lbstate/lbstate/reflectors/kubeapi"
	"github.com/lbstate/lbstate/reflectors/redirectpolicy"
	"github.com/lbstate/lbstate/reflectors/routes"
	"github.com/lbstate/lbstate/reflectors/routestatus"
	"github.com/lbstate/lbstate/tables"
)

// Composed as an agent composes them (the Kubernetes source, the routes
// table and this cell, over one API server), an HTTPRoute on a Service
// gets lbstate's status.parents entry, written once: not before the
// source has read every Service (when a backend would seem missing).
func TestCellWritesTheStatusOfRoutesTheKubernetesSourceReads(t *testing.T) {
	svc := func(name string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}
	}
	web, a := svc("web"), svc("a")
	a.Spec.ClusterIP = "10.96.0.11"
	client := fake.NewClientset(web, a)
	rt := &gwv1.HTTPRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: gwv1.GroupVersion.String(), Kind: "HTTPRoute"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r", Generation: 2},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Group: ptr(gwv1.Group("")), Kind: ptr(gwv1.Kind("Service")), Name: "web"}}},
			Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
				BackendObjectReference: gwv1.BackendObjectReference{Name: "a", Port: ptr(gwv1.PortNumber(80))}}}}}},
		},
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rt)
	if err != nil {
		t.Fatal(err)
	}
	kinds := maps.Clone(routes.ResourceList)
	maps.Copy(kinds, redirectpolicy.ResourceList)
	maps.Copy(kinds, kubeapi.CRDListKinds)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), kinds,
		append(kubeapi.FakeCRDs(routes.Kinds()...), &unstructured.Unstructured{Object: m})...)

	h := hive.New(statedb.Cell, job.Cell, cell.SimpleHealthCell, tables.Cell, kubeapi.Cell, k8s.Cell, routes.Cell, routestatus.Cell,
		cell.Provide(func() kubernetes.Interface { return client }, func() dynamic.Interface { return dyn }))
	log := slog.New(slog.DiscardHandler)
	if err := h.Start(log, context.Background()); err != nil {
		t.Fatal(err)
	}
	defer h.Stop(log, context.Background())

	deadline := time.Now().Add(10 * time.Second)
	for {
		u, err := dyn.Resource(routes.Resources[0].Versions[0]).Namespace("ns").Get(context.Background(), "r", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		parents, _, _ := unstructured.NestedSlice(u.Object, "status", "parents")
		if len(parents) == 1 {
			p := parents[0].(map[string]any)
			conds := p["conditions"].([]any)
			acc, res := conds[0].(map[string]any), conds[1].(map[string]any)
			if p["controllerName"] != routestatus.ControllerName || acc["reason"] != "Accepted" || res["reason"] != "ResolvedRefs" || acc["observedGeneration"] != int64(2) {
				t.Fatalf("status.parents[0] %v, want ours, Accepted and ResolvedRefs at generation 2", p)
			}
			updates := 0
			for _, a := range dyn.Actions() {
				if a.GetVerb() == "update" && a.GetSubresource() == "status" {
					updates++
				}
			}
			if updates != 1 {
				t.Fatalf("%d status updates, want 1", updates)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no status.parents within 10s: %v", u.Object["status"])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ptr[T any](v T) *T { return &v }
