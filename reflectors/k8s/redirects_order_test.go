package k8s

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/reflectors/redirectpolicy"
	"github.com/lbstate/lbstate/tables"
)

// newPolicyReflector returns a reflector on node-1 that keeps policy rows,
// fed by its apply method (no Run).
func newPolicyReflector(t testing.TB) (*Reflector, *tables.Writer, *statedb.DB, statedb.RWTable[*redirectpolicy.Status]) {
	t.Helper()
	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := redirectpolicy.NewTable(db)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig
	cfg.K8sNodeName = "node-1"
	src, err := reflectors.NewSource(w, lb.SourceK8s, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReflector(cfg, src, lb.SourceK8s)
	if err != nil {
		t.Fatal(err)
	}
	r.ReportPolicies(rows)
	return r, w, db, rows
}

func dnsPolicy(name string, created time.Time) *redirectpolicy.Policy {
	return &redirectpolicy.Policy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", CreationTimestamp: metav1.NewTime(created)},
		Spec: redirectpolicy.Spec{
			RedirectFrontend: redirectpolicy.Frontend{ServiceMatcher: &redirectpolicy.ServiceMatcher{ServiceName: "kube-dns", Namespace: "kube-system"}},
			RedirectBackend: redirectpolicy.Backend{
				LocalEndpointSelector: metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "node-local-dns"}},
				ToPorts:               []redirectpolicy.PortInfo{{Port: "5353", Protocol: "UDP"}},
			},
		},
	}
}

// dnsPodObject is a node-local DNS pod on node-1, with hostPort (if not
// 0) on its UDP port.
func dnsPodObject(name, ip string, ready bool, hostPort int32) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", Labels: map[string]string{"k8s-app": "node-local-dns"}},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "dns",
			Ports: []corev1.ContainerPort{{Name: "dns", ContainerPort: 5353, Protocol: corev1.ProtocolUDP, HostPort: hostPort}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

func kubeDNS() (*corev1.Service, *discoveryv1.EndpointSlice) {
	udp := corev1.ProtocolUDP
	tcp, port, name, tcpName := corev1.ProtocolTCP, int32(53), "dns", "dns-tcp"
	return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: "kube-system"},
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: udp}, {Name: "dns-tcp", Port: 53, Protocol: tcp}}},
		}, &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "kube-dns-1", Namespace: "kube-system", Labels: map[string]string{LabelServiceName: "kube-dns"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port, Protocol: &udp}, {Name: &tcpName, Port: &port, Protocol: &tcp}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}},
		}
}

// tablesDump prints the services, frontends, backends and policy rows.
func tablesDump(db *statedb.DB, w *tables.Writer, rows statedb.Table[*redirectpolicy.Status]) string {
	var b strings.Builder
	txn := db.ReadTxn()
	for s := range w.Services().All(txn) {
		fmt.Fprintln(&b, strings.Join(s.TableRow(), " | "))
	}
	for fe := range w.Frontends().All(txn) {
		fmt.Fprintln(&b, strings.Join(fe.TableRow(), " | "))
	}
	for be := range w.Backends().All(txn) {
		fmt.Fprintln(&b, strings.Join(be.TableRow(), " | "))
	}
	for st := range rows.All(txn) {
		fmt.Fprintln(&b, strings.Join(st.TableRow(), " | "))
	}
	return b.String()
}

// Policies, the Service, its EndpointSlice and the pods, in every order
// (each its own batch) and all in one batch, give the same tables: the
// older of two policies on kube-dns redirects its UDP ClusterIP frontend
// (the TCP one, not on the policy's port, keeps kube-dns's backend) to
// the ready pod and the unready one (in standby), and the newer one waits.
func TestRedirectPoliciesInAnyOrderGiveTheSameTables(t *testing.T) {
	svc, slice := kubeDNS()
	// A single-port policy redirects every port of its protocol: narrow
	// the older one to UDP by number.
	older := dnsPolicy("older", time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	older.Spec.RedirectFrontend.ServiceMatcher.ToPorts = []redirectpolicy.PortInfo{{Port: "53", Protocol: "UDP"}}
	inputs := []struct {
		name string
		obj  any
	}{
		{"older policy", older},
		{"newer policy", dnsPolicy("newer", time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC))},
		{"service", svc},
		{"slice", slice},
		{"ready pod", dnsPodObject("a", "10.0.1.1", true, 5300)},
		{"unready pod", dnsPodObject("b", "10.0.1.2", false, 0)},
	}
	all := make([]event, len(inputs))
	for i, in := range inputs {
		all[i] = event{obj: in.obj}
	}
	r, w, db, rows := newPolicyReflector(t)
	r.apply(all)
	want := tablesDump(db, w, rows)
	for _, line := range []string{
		"10.96.0.10:53/UDP | ClusterIP | kube-system/kube-dns | dns | 10.0.1.1:5353/UDP, 10.0.1.2:5353/UDP (not-ready weight=0) | kube-system/older:lrp",
		"10.96.0.10:53/TCP | ClusterIP | kube-system/kube-dns | dns-tcp | 10.0.0.1:53/TCP |  |",
		"kube-system/newer | k8s | service kube-system/kube-dns (all UDP ports) | kube-system/newer:lrp | a active, b not-ready | kube-system/older |",
		"kube-system/older | k8s | service kube-system/kube-dns 53/UDP | kube-system/older:lrp | a active, b not-ready |  |",
	} {
		if !strings.Contains(want, line) {
			t.Errorf("end state lacks\n%s\nin\n%s", line, want)
		}
	}

	order := make([]int, len(inputs))
	for i := range order {
		order[i] = i
	}
	count := 0
	permute(order, 0, func(order []int) {
		count++
		r, w, db, rows := newPolicyReflector(t)
		for _, i := range order {
			r.apply([]event{{obj: inputs[i].obj}})
		}
		if got := tablesDump(db, w, rows); got != want {
			names := make([]string, len(order))
			for j, i := range order {
				names[j] = inputs[i].name
			}
			t.Fatalf("order %v gives\n%s\nwant\n%s", names, got, want)
		}
	})
	if count != 720 {
		t.Fatalf("played %d orders, want 720", count)
	}
}

// permute calls fn with every permutation of xs[k:].
func permute(xs []int, k int, fn func([]int)) {
	if k == len(xs) {
		fn(xs)
		return
	}
	for i := k; i < len(xs); i++ {
		xs[k], xs[i] = xs[i], xs[k]
		permute(xs, k+1, fn)
		xs[k], xs[i] = xs[i], xs[k]
	}
}

// BenchmarkPodChangeWithPolicies measures the reflector's own cost of one
// pod's readiness flip among 1,000 pods and 1,000 serviceMatcher policies
// in one namespace (each selecting one pod), without a reconciler: the
// change reaches only the policy that selects the pod.
func BenchmarkPodChangeWithPolicies(b *testing.B) {
	const n = 1000
	r, _, _, _ := newPolicyReflector(b)
	var evs []event
	pods := make([]*corev1.Pod, n)
	for i := range n {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%d", i), Namespace: "bench"},
			Spec: corev1.ServiceSpec{ClusterIP: fmt.Sprintf("10.96.%d.%d", i>>8, i&255), Ports: []corev1.ServicePort{{Port: 80}}}}
		p := dnsPolicy(fmt.Sprintf("lrp-%d", i), time.Time{})
		p.Namespace = "bench"
		p.Spec.RedirectFrontend.ServiceMatcher = &redirectpolicy.ServiceMatcher{ServiceName: svc.Name}
		p.Spec.RedirectBackend.LocalEndpointSelector.MatchLabels = map[string]string{"app": p.Name}
		pods[i] = dnsPodObject(fmt.Sprintf("pod-%d", i), fmt.Sprintf("10.1.%d.%d", i>>8, i&255), true, 0)
		pods[i].Namespace, pods[i].Labels = "bench", map[string]string{"app": p.Name}
		evs = append(evs, event{obj: svc}, event{obj: p}, event{obj: pods[i]})
	}
	r.apply(evs)
	i := 0
	for b.Loop() {
		pod := pods[i%n].DeepCopy()
		if i/n%2 == 0 {
			pod.Status.Conditions[0].Status = corev1.ConditionFalse
		}
		r.apply([]event{{obj: pod}})
		i++
	}
}
