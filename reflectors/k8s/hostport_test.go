package k8s

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbstate/lbstate/tables"
)

// A pod's HostPort service goes when the pod is deleted, also when the
// pod's last update was invalid (skipped: the previous declaration stays).
// (Such a deletion once left the service behind.)
func TestHostPortServiceDeletedWithPodAfterInvalidUpdate(t *testing.T) {
	r, w, db := runFedReflector(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{
			Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}},
		}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.0.0.5"}}},
	}
	r.Push(pod, false)
	waitApplied(t, r, w, db, 0)
	name := HostPortServiceName(pod)
	if _, _, ok := w.Services().Get(db.ReadTxn(), tables.ServiceByName.Query(name)); !ok {
		t.Fatal("hostport service not declared")
	}
	bad := pod.DeepCopy()
	bad.Spec.Containers[0].Ports[0].HostIP = "nope"
	r.Push(bad, false)
	r.Push(bad, true)
	waitApplied(t, r, w, db, 1)
	if svc, _, ok := w.Services().Get(db.ReadTxn(), tables.ServiceByName.Query(name)); ok {
		t.Fatalf("pod deleted, but its HostPort service %s stays: %v", name, svc)
	}
	if n := w.Frontends().NumObjects(db.ReadTxn()); n != 2 { // the two barriers
		t.Fatalf("%d frontends after the pod's deletion, want 2 (barriers)", n)
	}
}
