package k8s

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors/kubeapi"
	"github.com/lbstate/lbstate/reflectors/redirectpolicy"
	"github.com/lbstate/lbstate/reflectors/routes"
)

// splitRoute is an HTTPRoute sending default/web's port 80 to
// web-primary and web-canary, 90:10.
const splitRoute = `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web-split, namespace: default}
spec:
  parentRefs: [{group: "", kind: Service, name: web, port: 80}]
  rules:
  - backendRefs:
    - {name: web-primary, port: 80, weight: 90}
    - {name: web-canary, port: 80, weight: 10}
`

// routeObject is splitRoute as the dynamic client stores it.
func routeObject(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	objs, err := kubeapi.DecodeManifests("route.yaml", []byte(splitRoute), routes.Kinds()...)
	if err != nil {
		t.Fatal(err)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(objs[0])
	if err != nil {
		t.Fatal(err)
	}
	gvr, _ := routes.ResourceOf(objs[0])
	obj := &unstructured.Unstructured{Object: u}
	obj.SetAPIVersion(gvr.GroupVersion().String())
	obj.SetKind("HTTPRoute")
	return obj
}

// routeServices are the route's parent and backends, and the pod the
// policies select.
func routeServices() *fake.Clientset {
	var objs []runtime.Object
	for i, name := range []string{"web", "web-primary", "web-canary"} {
		objs = append(objs, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.ServiceSpec{ClusterIP: fmt.Sprintf("10.96.0.%d", i+1),
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
		})
	}
	return fake.NewClientset(append(objs, dnsPod())...)
}

var web = lb.NewServiceName("default", "web")

// Scenario 13 of the e2e suite, on fakes: CRDs installed after the agent
// started (first not Established, then Established) bring their routes
// and policies in within 5 s, without a restart.
func TestRoutesAndPoliciesApplyWhenTheirCRDsAreInstalledAfterStart(t *testing.T) {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), allResources(),
		routeObject(t), policyObject(t, "169.254.20.10"))
	r, w, db, _ := startPolicyReflector(t, routeServices(), dyn, policyTest{})
	eventually(t, "synced", r.src.IsSynced)
	if routed(w, db, web) != 0 {
		t.Fatal("routed before the HTTPRoute CRD is installed")
	}

	crds := dyn.Resource(kubeapi.CRDResource)
	httpRoutes := routes.Resources[0].Versions[0]
	for _, crd := range []*unstructured.Unstructured{
		kubeapi.CRDObject(httpRoutes, "HTTPRoute", false, "v1"),
		kubeapi.CRDObject(redirectpolicy.Resource, redirectpolicy.Kind, false, redirectpolicy.Version),
	} {
		if _, err := crds.Create(context.Background(), crd, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	established := time.Now()
	for _, crd := range []*unstructured.Unstructured{
		kubeapi.CRDObject(httpRoutes, "HTTPRoute", true, "v1"),
		kubeapi.CRDObject(redirectpolicy.Resource, redirectpolicy.Kind, true, redirectpolicy.Version),
	} {
		if _, err := crds.Update(context.Background(), crd, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	redirected := redirectedBackends(w, db, "169.254.20.10:53/UDP")
	for routed(w, db, web) == 0 || redirected() != "10.0.1.1:5353/UDP" {
		if time.Since(established) > 5*time.Second {
			t.Fatalf("not applied 5 s after the CRDs were Established: %d routes on web, policy redirecting to %s",
				routed(w, db, web), redirected())
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("applied %v after the CRDs were Established", time.Since(established))
}

// The source's sync waits for the kinds whose CRDs are installed at start;
// a CRD removed takes its kind's objects out of the tables (a fake API
// server does not delete them first, as a real one does), and only its
// kind's.
func TestObjectsOfARemovedCRDLeaveTheTables(t *testing.T) {
	dyn := installedCRDs(routeObject(t), policyObject(t, "169.254.20.10"))
	r, w, db, _ := startPolicyReflector(t, routeServices(), dyn, policyTest{})
	redirected := redirectedBackends(w, db, "169.254.20.10:53/UDP")
	eventually(t, "synced", r.src.IsSynced)
	if routed(w, db, web) != 1 || redirected() != "10.0.1.1:5353/UDP" {
		t.Fatalf("synced with %d routes on web (want 1) and the policy redirecting to %s", routed(w, db, web), redirected())
	}

	httpRoutes := routes.Resources[0].Versions[0]
	crds := dyn.Resource(kubeapi.CRDResource)
	if err := crds.Delete(context.Background(), httpRoutes.GroupResource().String(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the route gone", func() bool { return routed(w, db, web) == 0 })
	if got := redirected(); got != "10.0.1.1:5353/UDP" {
		t.Errorf("policy redirecting to %s after the HTTPRoute CRD went, want it kept", got)
	}

	if err := crds.Delete(context.Background(), redirectpolicy.Resource.GroupResource().String(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the policy gone", func() bool { return redirected() == "none" })
}
