package redirectpolicy

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
	"github.com/lbstate/lbstate/reflectors/k8s"
	"github.com/lbstate/lbstate/tables"
)

// pipeline is a Controller on node-1 writing as k8s, beside what the
// k8s services source writes of the Services, EndpointSlices and Pods
// (HostPort services) it is handed, in its apply method (no Run).
type pipeline struct {
	*Controller
}

// newPolicyReflector returns a pipeline over new tables, and its policy
// rows.
func newPolicyReflector(t testing.TB) (*pipeline, *tables.Writer, *statedb.DB, statedb.RWTable[*Status]) {
	t.Helper()
	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := NewTable(db)
	if err != nil {
		t.Fatal(err)
	}
	src, err := reflectors.NewSourceAs(w, "k8s-redirect-policies", lb.SourceK8s, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	return &pipeline{NewController(Options{}, "node-1", src, lb.SourceK8s, rows)}, w, db, rows
}

// apply writes a batch: its Services, EndpointSlices and Pods' HostPort
// services as the k8s services source declares them, in one transaction,
// then the policies and pods through the controller, in another.
func (p *pipeline) apply(batch []event) {
	w := p.w
	txn := w.WriteTxn()
	node := lb.Node{Name: "node-1"}
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	var rest []event
	for _, ev := range batch {
		switch o := ev.Obj.(type) {
		case *corev1.Service:
			name := lb.NewServiceName(o.Namespace, o.Name)
			if ev.Deleted {
				must(w.DeleteService(txn, name, lb.SourceK8s))
				continue
			}
			params, ok, _, err := k8s.ConvertService(o, k8s.ServiceOptions{Node: node, Source: lb.SourceK8s})
			must(err)
			if ok {
				must(w.UpsertService(txn, params))
			}
		case *discoveryv1.EndpointSlice:
			name, backends, _, err := k8s.ConvertEndpointSlice(o)
			must(err)
			if ev.Deleted {
				backends = nil
			}
			must(w.SetBackends(txn, name, lb.SourceK8s, backends...))
		case *corev1.Pod:
			name := k8s.HostPortServiceName(o)
			params, backends, ok, err := k8s.ConvertPod(o, node)
			must(err)
			if ok && !ev.Deleted {
				params.Source = lb.SourceK8s
				must(w.UpsertService(txn, params))
				must(w.SetBackends(txn, name, lb.SourceK8s, backends...))
			} else {
				must(w.DeleteService(txn, name, lb.SourceK8s))
				must(w.SetBackends(txn, name, lb.SourceK8s))
			}
			rest = append(rest, ev)
		default:
			rest = append(rest, ev)
		}
	}
	txn.Commit()
	if len(rest) > 0 {
		must(p.Controller.apply(rest))
	}
}

func dnsPolicy(name string, created time.Time) *Policy {
	return &Policy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", CreationTimestamp: metav1.NewTime(created)},
		Spec: Spec{
			RedirectFrontend: Frontend{ServiceMatcher: &ServiceMatcher{ServiceName: "kube-dns", Namespace: "kube-system"}},
			RedirectBackend: Backend{
				LocalEndpointSelector: metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "node-local-dns"}},
				ToPorts:               []PortInfo{{Port: "5353", Protocol: "UDP"}},
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
			ObjectMeta:  metav1.ObjectMeta{Name: "kube-dns-1", Namespace: "kube-system", Labels: map[string]string{k8s.LabelServiceName: "kube-dns"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port, Protocol: &udp}, {Name: &tcpName, Port: &port, Protocol: &tcp}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}},
		}
}

// tablesDump prints the services, frontends, backends and policy rows.
func tablesDump(db *statedb.DB, w *tables.Writer, rows statedb.Table[*Status]) string {
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
	older.Spec.RedirectFrontend.ServiceMatcher.ToPorts = []PortInfo{{Port: "53", Protocol: "UDP"}}
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
		all[i] = event{Obj: in.obj}
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
			r.apply([]event{{Obj: inputs[i].obj}})
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
		p.Spec.RedirectFrontend.ServiceMatcher = &ServiceMatcher{ServiceName: svc.Name}
		p.Spec.RedirectBackend.LocalEndpointSelector.MatchLabels = map[string]string{"app": p.Name}
		pods[i] = dnsPodObject(fmt.Sprintf("pod-%d", i), fmt.Sprintf("10.1.%d.%d", i>>8, i&255), true, 0)
		pods[i].Namespace, pods[i].Labels = "bench", map[string]string{"app": p.Name}
		evs = append(evs, event{Obj: svc}, event{Obj: p}, event{Obj: pods[i]})
	}
	r.apply(evs)
	i := 0
	for b.Loop() {
		pod := pods[i%n].DeepCopy()
		if i/n%2 == 0 {
			pod.Status.Conditions[0].Status = corev1.ConditionFalse
		}
		r.apply([]event{{Obj: pod}})
		i++
	}
}
