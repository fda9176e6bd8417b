package kubeapi

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The API feed's built-in kinds are served as client-go's factories
// served them to the k8s reflector: the
// local Node and its Pods are listed and watched with field selectors
// (the rest unfiltered), and objects are stored without what lbstate
// never reads (managed fields, the last-applied annotation).
func TestBuiltinKindsSelectThisNodeAndDropUnused(t *testing.T) {
	client := fake.NewClientset(&corev1.Service{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: "web",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		Annotations:   map[string]string{corev1.LastAppliedConfigAnnotation: "{}", "keep": "me"},
	}})
	var (
		mu        sync.Mutex
		selectors = map[string][]string{} // "verb resource" -> field selectors
	)
	record := func(a k8stesting.Action) {
		var sel string
		switch a := a.(type) {
		case k8stesting.ListActionImpl:
			sel = a.ListOptions.FieldSelector
		case k8stesting.WatchActionImpl:
			sel = a.ListOptions.FieldSelector
		}
		mu.Lock()
		defer mu.Unlock()
		key := a.GetVerb() + " " + a.GetResource().Resource
		if !slices.Contains(selectors[key], sel) {
			selectors[key] = append(selectors[key], sel)
		}
	}
	client.PrependReactor("list", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		record(a)
		return false, nil, nil
	})
	client.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		record(a)
		return false, nil, nil
	})
	f := NewAPIFeed(Clients{Client: client}, slog.New(slog.DiscardHandler))
	defer f.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ev := &recorded{}
	go f.Subscribe(ctx, Subscription{Kinds: []FeedKind{Services(), EndpointSlices(), LocalNode("n1"), LocalPods("n1")}, Events: ev}) //nolint:errcheck
	eventually(t, "synced", ev.isSynced)
	eventually(t, "every informer watching", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(selectors) == 8
	})
	mu.Lock()
	for key, want := range map[string]string{
		"list services": "", "watch services": "", "list endpointslices": "", "watch endpointslices": "",
		"list nodes": "metadata.name=n1", "watch nodes": "metadata.name=n1",
		"list pods": "spec.nodeName=n1", "watch pods": "spec.nodeName=n1",
	} {
		if got := selectors[key]; len(got) != 1 || got[0] != want {
			t.Errorf("%s with field selectors %q, want %q", key, got, want)
		}
	}
	mu.Unlock()
	svc := ev.first().(*corev1.Service)
	if svc.ManagedFields != nil || svc.Annotations[corev1.LastAppliedConfigAnnotation] != "" || svc.Annotations["keep"] != "me" {
		t.Fatalf("stored service keeps what lbstate never reads, or lost what it does: %+v", svc.ObjectMeta)
	}
}

// The metadata informer stores a Node's name, labels and resource
// version, nothing else.
func TestNodeMetadataKeepsOnlyLabels(t *testing.T) {
	in := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: "node-2", Labels: map[string]string{"zone": "a"}, ResourceVersion: "7",
		Annotations:   map[string]string{"node.alpha.kubernetes.io/ttl": "0"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
		UID:           "0f2c", Finalizers: []string{"x"},
	}}
	out, err := labelsOnly(in)
	if err != nil {
		t.Fatal(err)
	}
	want := metav1.ObjectMeta{Name: "node-2", Labels: map[string]string{"zone": "a"}, ResourceVersion: "7"}
	if got := out.(*metav1.PartialObjectMetadata).ObjectMeta; got.Name != want.Name || got.ResourceVersion != want.ResourceVersion ||
		got.Labels["zone"] != "a" || len(got.Labels) != 1 || got.Annotations != nil || got.ManagedFields != nil || got.UID != "" || got.Finalizers != nil {
		t.Fatalf("labelsOnly kept %+v", got)
	}
}

// recorded keeps what a subscription handed over.
type recorded struct {
	mu     sync.Mutex
	objs   []any
	synced bool
}

func (r *recorded) Push(obj any, deleted bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !deleted {
		r.objs = append(r.objs, obj)
	}
}

func (r *recorded) Synced() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.synced = true
}

func (r *recorded) isSynced() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.synced
}

func (r *recorded) first() any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.objs[0]
}
