package kubeapi

import (
	"context"
	"unique"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// The built-in kinds an API feed serves, each from one informer shared
// by every subscriber that asks for it. Objects are stored trimmed to
// what load balancing reads (managed fields, the last-applied annotation,
// a Node's images and conditions, most of a Pod's spec), which saves the
// informers' memory; every subscriber of a kind gets the same trimmed
// objects.

// NodesResource is the resource of Nodes.
var NodesResource = corev1.SchemeGroupVersion.WithResource("nodes")

// Services is every Service (*corev1.Service).
func Services() FeedKind {
	return FeedKind{Kind: "Service", key: "services", informer: func(f *factories) cache.SharedIndexInformer {
		core := f.clients.Client.CoreV1()
		return f.typed.Informer(corev1.SchemeGroupVersion.WithResource("services"), &corev1.Service{},
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return core.Services("").List(ctx, o)
			},
			func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return core.Services("").Watch(ctx, o)
			})
	}}
}

// EndpointSlices is every EndpointSlice (*discoveryv1.EndpointSlice).
func EndpointSlices() FeedKind {
	return FeedKind{Kind: "EndpointSlice", key: "endpointslices", informer: func(f *factories) cache.SharedIndexInformer {
		d := f.clients.Client.DiscoveryV1()
		return f.typed.Informer(discoveryv1.SchemeGroupVersion.WithResource("endpointslices"), &discoveryv1.EndpointSlice{},
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return d.EndpointSlices("").List(ctx, o)
			},
			func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return d.EndpointSlices("").Watch(ctx, o)
			})
	}}
}

// LocalNode is the Node named node (*corev1.Node). A directory has no
// selectors: it hands over every Node, and the subscriber picks.
func LocalNode(node string) FeedKind {
	return FeedKind{Kind: "Node", ClusterScoped: true, key: "node " + node, only: func(obj any) bool {
		n, ok := obj.(*corev1.Node)
		return ok && n.Name == node
	}, informer: func(f *factories) cache.SharedIndexInformer {
		core := f.clients.Client.CoreV1()
		only := onlyNode("metadata.name", node)
		return f.typed.Informer(NodesResource, &corev1.Node{},
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return core.Nodes().List(ctx, only(o))
			},
			func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return core.Nodes().Watch(ctx, only(o))
			})
	}}
}

// NodeLabels is every Node's name and labels, as metadata
// (*metav1.PartialObjectMetadata) from an API server, through the
// metadata client (or one made of the clientset's REST client); a
// directory hands over its Nodes (*corev1.Node) instead.
func NodeLabels() FeedKind {
	return FeedKind{Kind: "Node", ClusterScoped: true, key: "node labels", informer: func(f *factories) cache.SharedIndexInformer {
		return f.metadata.ForResource(NodesResource).Informer()
	}}
}

// LocalPods are the Pods on node (*corev1.Pod, trimmed to their labels,
// node, host network, containers' names and ports, phase, IPs and Ready
// condition). A directory hands over every Pod: the subscriber picks.
func LocalPods(node string) FeedKind {
	return FeedKind{Kind: "Pod", key: "pods " + node, only: func(obj any) bool {
		p, ok := obj.(*corev1.Pod)
		return ok && p.Spec.NodeName == node
	}, informer: func(f *factories) cache.SharedIndexInformer {
		core := f.clients.Client.CoreV1()
		only := onlyNode("spec.nodeName", node)
		return f.typed.Informer(corev1.SchemeGroupVersion.WithResource("pods"), &corev1.Pod{},
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return core.Pods("").List(ctx, only(o))
			},
			func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return core.Pods("").Watch(ctx, only(o))
			})
	}}
}

// onlyNode narrows a list or watch to one node's objects.
func onlyNode(field, node string) func(metav1.ListOptions) metav1.ListOptions {
	return func(opts metav1.ListOptions) metav1.ListOptions {
		opts.FieldSelector = field + "=" + node
		return opts
	}
}

// factories are an API feed's informer factories.
type factories struct {
	clients  Clients
	typed    *Informers // built-in kinds, trimmed by dropUnused
	metadata *Informers // metadata (every Node's labels), trimmed by labelsOnly
}

func newFactories(conn *Connection, c Clients) *factories {
	meta := c.Metadata
	if meta == nil {
		meta = NodeMetadataClient(c.Client)
	}
	return &factories{clients: c, typed: NewInformers(conn, c.Client, dropUnused), metadata: MetadataInformers(conn, meta, labelsOnly)}
}

func (f *factories) start(stop <-chan struct{}) {
	f.typed.Start(stop)
	f.metadata.Start(stop)
}

func (f *factories) shutdown() {
	f.typed.Shutdown()
	f.metadata.Shutdown()
}

// dropUnused strips what lbstate never reads from informer objects.
func dropUnused(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
		if a := m.GetAnnotations(); a != nil {
			delete(a, corev1.LastAppliedConfigAnnotation)
		}
	}
	switch o := obj.(type) {
	case *corev1.Node:
		o.Status.Images = nil
		o.Status.Conditions = nil
	case *corev1.Pod:
		return SlimPod(o), nil
	}
	return obj, nil
}

// SlimPod keeps of a pod what load balancing reads: its metadata, node,
// host network, containers' names and ports, phase, IPs and Ready
// condition.
func SlimPod(p *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{ObjectMeta: p.ObjectMeta, Status: corev1.PodStatus{
		Phase: p.Status.Phase, PodIPs: p.Status.PodIPs, Conditions: podReadiness(p.Status.Conditions)}}
	out.ManagedFields = nil
	out.Spec.NodeName, out.Spec.HostNetwork = p.Spec.NodeName, p.Spec.HostNetwork
	for _, c := range p.Spec.Containers {
		out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: c.Name, Ports: c.Ports})
	}
	return out
}

// podReadiness keeps the Ready condition of a pod.
func podReadiness(conds []corev1.PodCondition) []corev1.PodCondition {
	for _, c := range conds {
		if c.Type == corev1.PodReady {
			return []corev1.PodCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return nil
}

// labelsOnly keeps a node's name, labels and resource version (which the
// informer compares); everything else is dropped before it is stored.
// Label keys and most values are the same on thousands of nodes (zones,
// regions, instance types), so they are interned: the informer's store
// and the node-labels table then hold one copy of each text.
func labelsOnly(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil // a tombstone, or a marker of the informer
	}
	labels := make(map[string]string, len(m.Labels))
	for k, v := range m.Labels {
		if v != m.Name { // the hostname label: one node's alone
			v = unique.Make(v).Value()
		}
		labels[unique.Make(k).Value()] = v
	}
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Labels: labels, ResourceVersion: m.ResourceVersion,
	}}, nil
}
