package k8s

// Regression tests from a review of the sources, the agent and lbctl.
// Each test's comment describes the bug it caught (fixed since).

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

func review2Fed(t *testing.T) (*Reflector, *tables.Writer, *statedb.DB) {
	t.Helper()
	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig
	cfg.K8sNodeName = "n1"
	r := newTestReflector(t, cfg, w)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go r.Run(ctx, func(context.Context) error { return nil })
	return r, w, db
}

// review2Barrier pushes a marker service and waits until it is in the
// tables, so that everything pushed before it has been applied.
func review2Barrier(t *testing.T, r *Reflector, w *tables.Writer, db *statedb.DB, n int) {
	t.Helper()
	name := fmt.Sprintf("barrier-%d", n)
	r.Push(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "zz", Name: name},
		Spec: corev1.ServiceSpec{ClusterIP: fmt.Sprintf("10.255.0.%d", n+1),
			Ports: []corev1.ServicePort{{Port: 80}}},
	}, false)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, _, ok := w.Services().Get(db.ReadTxn(), tables.ServiceByName.Query(lb.NewServiceName("zz", name))); ok {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("barrier not applied")
}

// A pod whose last update is invalid (kept: the previous declaration
// stays) and that is then deleted must not leave its HostPort service
// behind.
func TestReview2PodDeletedAfterInvalidUpdate(t *testing.T) {
	r, w, db := review2Fed(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{
			Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}},
		}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.0.0.5"}}},
	}
	r.Push(pod, false)
	review2Barrier(t, r, w, db, 0)
	name := HostPortServiceName(pod)
	if _, _, ok := w.Services().Get(db.ReadTxn(), tables.ServiceByName.Query(name)); !ok {
		t.Fatal("hostport service not declared")
	}
	bad := pod.DeepCopy()
	bad.Spec.Containers[0].Ports[0].HostIP = "nope"
	r.Push(bad, false)
	r.Push(bad, true)
	review2Barrier(t, r, w, db, 1)
	if svc, _, ok := w.Services().Get(db.ReadTxn(), tables.ServiceByName.Query(name)); ok {
		t.Fatalf("pod deleted, but its HostPort service %s stays: %v", name, svc)
	}
	if n := w.Frontends().NumObjects(db.ReadTxn()); n != 2 { // the two barriers
		t.Fatalf("%d frontends after the pod's deletion, want 2 (barriers)", n)
	}
}

// kube-proxy (and Cilium) serve a LoadBalancer's nodePort whenever it is
// set, also with allocateLoadBalancerNodePorts false (a nodePort given
// explicitly, or kept from before the flag was turned off).
func TestReview2AllocateLBNodePortsFalseExplicitNodePort(t *testing.T) {
	f := false
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lb"},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.1",
			AllocateLoadBalancerNodePorts: &f,
			Ports:                         []corev1.ServicePort{{Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP}},
		},
	}
	params, ok, err := ConvertService(svc, ServiceOptions{Node: lb.Node{Name: "n1"}})
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	for _, fe := range params.Frontends {
		if fe.Type == lb.SVCTypeNodePort {
			return
		}
	}
	t.Fatalf("no NodePort frontend for nodePort 30080: %v", params.Frontends)
}

// Run must return once ctx is done, also when the informers' handlers are
// blocked on a full event channel (the loop no longer reads it).
func TestReview2RunReturnsWithFullChannel(t *testing.T) {
	const n = 15000
	objs := make([]runtime.Object, 0, 2*n)
	for i := range n {
		name := fmt.Sprintf("svc-%d", i)
		objs = append(objs, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "scale"},
			Spec: corev1.ServiceSpec{
				ClusterIP: fmt.Sprintf("10.%d.%d.%d", 96+i/65536, (i/256)%256, i%256),
				Ports:     []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}},
			},
		})
		port := int32(8080)
		objs = append(objs, &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: "scale", Labels: map[string]string{LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Port: &port}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{fmt.Sprintf("10.1.%d.%d", i/256, i%256)}}},
		})
	}
	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig
	cfg.K8sNodeName = "n1"
	r := newTestReflector(t, cfg, w)
	client := fake.NewClientset(objs...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, r.WatchAPI(client)) }()
	deadline := time.Now().Add(30 * time.Second)
	for len(r.events) < cap(r.events) {
		if time.Now().After(deadline) {
			t.Fatal("nothing applied in 30s")
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("channel %d/%d at cancel, %d services applied", len(r.events), cap(r.events), w.Services().NumObjects(db.ReadTxn()))
	cancel()
	select {
	case <-done:
		time.Sleep(200 * time.Millisecond)
		t.Logf("returned; %d services applied, channel %d", w.Services().NumObjects(db.ReadTxn()), len(r.events))
	case <-time.After(15 * time.Second):
		t.Fatalf("Run did not return 15s after ctx was cancelled (%d of %d services applied)",
			w.Services().NumObjects(db.ReadTxn()), n)
	}
}

// kube-proxy (GA LoadBalancerIPMode) and Cilium do not intercept an
// ingress IP whose ipMode is Proxy: traffic must reach the load balancer.
func TestReview2LBIngressIPModeProxy(t *testing.T) {
	proxy := corev1.LoadBalancerIPModeProxy
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lb"},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.1",
			Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP}},
		},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{
			{IP: "192.0.2.1", IPMode: &proxy},
		}}},
	}
	params, ok, err := ConvertService(svc, ServiceOptions{Node: lb.Node{Name: "n1"}})
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	for _, fe := range params.Frontends {
		if fe.Type == lb.SVCTypeLoadBalancer {
			t.Fatalf("LoadBalancer frontend %s for an ingress IP in ipMode Proxy", fe.Address)
		}
	}
}
