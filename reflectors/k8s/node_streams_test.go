package k8s

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/lbstate/lbstate/reflectors/kubeapi"
)

// A node's labels come from the NodeLabels stream alone: the local-node
// informer, which a server that ignores its field selector (client-go's
// fake clientset) fills with every Node, once handed the reflector the
// others too. Listed before a node was deleted and watching from after
// (a fake's watch does not replay deletions), it brought the deleted
// node's labels back for good: the topology-keys script failed 2 in ~360
// runs under load with node-2's labels still in force.
func TestDeletedNodeStaysGoneWhateverTheLocalNodeInformerLists(t *testing.T) {
	node := func(name string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelTopologyZone: "a1"}}}
	}
	client := fake.NewClientset(node("node-1"), node("node-2"))
	// The local-node informer's list is from before node-2 was deleted.
	stale, err := client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	client.PrependReactor("list", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.ListActionImpl).ListOptions.FieldSelector == "metadata.name=node-1" {
			return true, stale.DeepCopy(), nil
		}
		return false, nil, nil
	})
	if err := client.Tracker().Delete(kubeapi.NodesResource, "", "node-2"); err != nil {
		t.Fatal(err)
	}

	w, db, cfg := newTestTables(t, "node-1")
	r := newTestReflector(t, cfg, w)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx, r.WatchAPI(client)) //nolint:errcheck // the tables say what it did
	for deadline := time.Now().Add(10 * time.Second); !r.src.IsSynced(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not synced after 10s")
		}
	}
	var names []string
	for n := range w.NodeLabels().All(db.ReadTxn()) {
		names = append(names, n.Name)
	}
	if !slices.Equal(names, []string{"node-1"}) {
		t.Fatalf("node-labels rows %q, want node-1 alone (node-2 was deleted)", names)
	}
}
