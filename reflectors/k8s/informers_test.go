package k8s

import (
	"context"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/lbstate/lbstate/reflectors/kubeapi"
)

// The typed informers keep what client-go's factories gave them: the
// local Node and its Pods are listed and watched with field selectors
// (the rest unfiltered), and objects are stored without what lbstate
// never reads (managed fields, the last-applied annotation).
func TestTypedInformersSelectThisNodeAndDropUnused(t *testing.T) {
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
	w, _, cfg := newTestTables(t, "n1")
	r := newTestReflector(t, cfg, w)
	factories, infs := r.typedInformers(kubeapi.NewConnection(r.src), client)
	ctx, cancel := context.WithCancel(context.Background())
	for _, f := range factories {
		f.Start(ctx.Done())
	}
	defer func() {
		cancel()
		for _, f := range factories {
			f.Shutdown()
		}
	}()
	synced := make([]cache.InformerSynced, len(infs))
	for i, inf := range infs {
		synced[i] = inf.HasSynced
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		t.Fatal("informers not synced")
	}
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
	obj, ok, _ := infs[0].GetStore().GetByKey("ns/web")
	if !ok {
		t.Fatal("service not stored")
	}
	svc := obj.(*corev1.Service)
	if svc.ManagedFields != nil || svc.Annotations[corev1.LastAppliedConfigAnnotation] != "" || svc.Annotations["keep"] != "me" {
		t.Fatalf("stored service keeps what lbstate never reads, or lost what it does: %+v", svc.ObjectMeta)
	}
}
