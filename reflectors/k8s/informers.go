package k8s

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/lbstate/lbstate/reflectors/kubeapi"
)

// typedInformers returns the informers of the typed kinds the source
// watches (Services, EndpointSlices, this node's Node and Pods), built on
// conn's ListWatches so that an outage is reported and healed at once
// (kubeapi), and their factories, to start and shut down.
func (r *Reflector) typedInformers(conn *kubeapi.Connection, client kubernetes.Interface) ([]*kubeapi.Informers, []cache.SharedIndexInformer) {
	all := kubeapi.NewInformers(conn, client, dropUnused)
	node := kubeapi.NewInformers(conn, client, dropUnused)
	pods := kubeapi.NewInformers(conn, client, dropUnused)
	// onlyThisNode narrows a list or watch to this node's objects.
	onlyThisNode := func(field string, opts metav1.ListOptions) metav1.ListOptions {
		opts.FieldSelector = field + "=" + r.cfg.K8sNodeName
		return opts
	}
	core, discovery := client.CoreV1(), client.DiscoveryV1()
	infs := []cache.SharedIndexInformer{
		all.Informer(corev1.SchemeGroupVersion.WithResource("services"), &corev1.Service{},
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return core.Services("").List(ctx, o)
			},
			func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return core.Services("").Watch(ctx, o)
			}),
		all.Informer(discoveryv1.SchemeGroupVersion.WithResource("endpointslices"), &discoveryv1.EndpointSlice{},
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return discovery.EndpointSlices("").List(ctx, o)
			},
			func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return discovery.EndpointSlices("").Watch(ctx, o)
			}),
		node.Informer(nodesResource, &corev1.Node{}, // ours only
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return core.Nodes().List(ctx, onlyThisNode("metadata.name", o))
			},
			func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return core.Nodes().Watch(ctx, onlyThisNode("metadata.name", o))
			}),
		pods.Informer(corev1.SchemeGroupVersion.WithResource("pods"), &corev1.Pod{}, // ours only (host ports)
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return core.Pods("").List(ctx, onlyThisNode("spec.nodeName", o))
			},
			func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return core.Pods("").Watch(ctx, onlyThisNode("spec.nodeName", o))
			}),
	}
	return []*kubeapi.Informers{all, node, pods}, infs
}
