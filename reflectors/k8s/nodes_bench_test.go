package k8s

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/lbstate/lbstate/reflectors/kubeapi"
	"github.com/lbstate/lbstate/tables"
)

// cloudNode is a Node as a cloud provider's kubelet writes it: a dozen
// labels, annotations, managed fields and a status with addresses,
// conditions and images, which the metadata informer must not keep.
func cloudNode(i int) *corev1.Node {
	name := fmt.Sprintf("ip-10-%d-%d-%d.eu-west-1.compute.internal", i>>16, (i>>8)&255, i&255)
	zone := fmt.Sprintf("eu-west-%d%c", 1+i%3, 'a'+rune(i/3%3))
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: name, UID: "5c5b8f5e-0000-4000-8000-000000000000", ResourceVersion: "12345",
		Labels: map[string]string{
			"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
			"beta.kubernetes.io/instance-type": "m6i.2xlarge", "node.kubernetes.io/instance-type": "m6i.2xlarge",
			"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "kubernetes.io/hostname": name,
			"failure-domain.beta.kubernetes.io/region": zone[:len(zone)-1], "topology.kubernetes.io/region": zone[:len(zone)-1],
			"failure-domain.beta.kubernetes.io/zone": zone, "topology.kubernetes.io/zone": zone,
			"example.com/rack": fmt.Sprintf("rack-%d", i%40),
		},
		Annotations: map[string]string{
			"node.alpha.kubernetes.io/ttl":                           "0",
			"volumes.kubernetes.io/controller-managed-attach-detach": "true",
		},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate}},
	}}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, {Type: corev1.NodeHostName, Address: name}}
	for j := range 20 {
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{Names: []string{fmt.Sprintf("registry.example.com/image-%d@sha256:%064d", j, j)}, SizeBytes: 1 << 28})
	}
	return n
}

// BenchmarkNodeLabelsMemory measures what watching every Node costs: the
// metadata informer's store of 5,000 Nodes trimmed to their labels, and
// their rows in the node-labels table. B/node is the heap retained per
// node, measured against the heap with the fake API server's objects
// alone.
func BenchmarkNodeLabelsMemory(b *testing.B) {
	const nodes = 5000
	objs := make([]k8sruntime.Object, nodes)
	for i := range objs {
		objs[i] = cloudNode(i)
	}
	for range b.N {
		client := fake.NewClientset(objs...)
		db := statedb.New()
		w, err := tables.New(db, nil)
		if err != nil {
			b.Fatal(err)
		}
		cfg := DefaultConfig
		cfg = cfg.WithNode("none")
		r := newTestReflector(b, cfg, w)
		before := liveHeap()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		// The node labels informer alone: the fake clientset ignores field
		// selectors, so WatchAPI's informer of the local Node would hold
		// every full Node too.
		feed := func(ctx context.Context) error {
			f := kubeapi.NewAPIFeed(kubeapi.Clients{Client: client}, r.src.Log())
			defer f.Stop()
			return f.Subscribe(ctx, kubeapi.Subscription{Kinds: []kubeapi.FeedKind{kubeapi.NodeLabels()}, Events: r})
		}
		go func() { done <- r.Run(ctx, feed) }()
		for w.NodeLabels().NumObjects(db.ReadTxn()) < nodes {
			time.Sleep(10 * time.Millisecond)
		}
		after := liveHeap()
		b.ReportMetric(float64(after-before)/nodes, "B/node")
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		runtime.KeepAlive(client)
	}
}

func liveHeap() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
