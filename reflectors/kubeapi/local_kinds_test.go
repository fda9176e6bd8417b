package kubeapi

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// An API feed hands a LocalNode subscriber only the Node named, and a
// LocalPods one only the Pods on it, even from a server that ignores
// field selectors (client-go's fake clientset does): the k8s reflector
// once took every Node's labels from the local-node informer too, a
// second stream of them beside NodeLabels', and the topology-keys script
// failed 2 in ~360 runs with a deleted node's labels still in force.
func TestLocalKindsAreOnlyTheLocalNodesWhateverTheServerFilters(t *testing.T) {
	node := func(name, zone string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"zone": zone}}}
	}
	pod := func(name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.PodSpec{NodeName: node}}
	}
	client := fake.NewClientset(node("n1", "a"), node("n2", "a"), pod("p1", "n1"), pod("p2", "n2"))
	f := NewAPIFeed(Clients{Client: client}, slog.New(slog.DiscardHandler))
	defer f.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ev := &named{}
	go f.Subscribe(ctx, Subscription{Kinds: []FeedKind{LocalNode("n1"), LocalPods("n1")}, Events: ev}) //nolint:errcheck
	eventually(t, "synced", ev.isSynced)

	// Changes to the other node and its pods, then to ours: once ours
	// are in, the others' would have been (one informer's events come
	// in order).
	nodes, pods := client.CoreV1().Nodes(), client.CoreV1().Pods("ns")
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(nodes.Update(ctx, node("n2", "b"), metav1.UpdateOptions{}))
	must(nodes.Create(ctx, node("n3", "a"), metav1.CreateOptions{}))
	must(nil, nodes.Delete(ctx, "n2", metav1.DeleteOptions{}))
	must(pods.Create(ctx, pod("p3", "n2"), metav1.CreateOptions{}))
	must(nil, pods.Delete(ctx, "p2", metav1.DeleteOptions{}))
	must(nodes.Update(ctx, node("n1", "c"), metav1.UpdateOptions{}))
	must(pods.Create(ctx, pod("p4", "n1"), metav1.CreateOptions{}))
	eventually(t, "n1's update and p4", func() bool {
		got := ev.all()
		return slices.Contains(got, "set Node n1 zone=c") && slices.Contains(got, "set Pod ns/p4")
	})
	for _, e := range ev.all() {
		if !slices.Contains([]string{"set Node n1 zone=a", "set Node n1 zone=c", "set Pod ns/p1", "set Pod ns/p4"}, e) {
			t.Errorf("handed %s, not of node n1", e)
		}
	}
}

// named records what a feed hands over, by kind and name.
type named struct {
	mu     sync.Mutex
	events []string
	synced bool
}

func (n *named) Push(obj any, deleted bool) {
	verb := "set"
	if deleted {
		verb = "delete"
	}
	var e string
	switch o := obj.(type) {
	case *corev1.Node:
		e = fmt.Sprintf("%s Node %s zone=%s", verb, o.Name, o.Labels["zone"])
	case *corev1.Pod:
		e = fmt.Sprintf("%s Pod %s/%s", verb, o.Namespace, o.Name)
	default:
		e = fmt.Sprintf("%s %T", verb, obj)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.events = append(n.events, e)
}

func (n *named) Synced() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.synced = true
}

func (n *named) isSynced() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.synced
}

func (n *named) all() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.events)
}
