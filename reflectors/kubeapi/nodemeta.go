package kubeapi

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
)

// NodeMetadataClient returns a metadata client that serves Nodes from
// client: it lists and watches full Nodes and hands over their metadata.
// It is for clients that have no metadata API of their own (client-go's
// fake clientset); with a real API server, metadata.NewForConfig's client
// saves the transfer of full objects too.
func NodeMetadataClient(client kubernetes.Interface) metadata.Interface {
	return nodeMetadata{client}
}

type nodeMetadata struct{ client kubernetes.Interface }

// IsWatchListSemanticsUnSupported passes on what the wrapped client says
// (client-go's fake clientset cannot stream a list as a watch), which is
// how informers decide whether to ask for it.
func (c nodeMetadata) IsWatchListSemanticsUnSupported() bool {
	u, ok := c.client.(interface{ IsWatchListSemanticsUnSupported() bool })
	return ok && u.IsWatchListSemanticsUnSupported()
}

var errNodesOnly = errors.New("node metadata client: only lists and watches Nodes")

func (c nodeMetadata) Resource(gvr schema.GroupVersionResource) metadata.Getter {
	return nodeMetadataGetter{c.client, gvr == NodesResource}
}

type nodeMetadataGetter struct {
	client kubernetes.Interface
	nodes  bool
}

func (g nodeMetadataGetter) Namespace(string) metadata.ResourceInterface { return g }

func (g nodeMetadataGetter) List(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	if !g.nodes {
		return nil, errNodesOnly
	}
	list, err := g.client.CoreV1().Nodes().List(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := &metav1.PartialObjectMetadataList{ListMeta: list.ListMeta}
	for i := range list.Items {
		out.Items = append(out.Items, *nodeMetadataOf(&list.Items[i]))
	}
	return out, nil
}

func (g nodeMetadataGetter) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if !g.nodes {
		return nil, errNodesOnly
	}
	w, err := g.client.CoreV1().Nodes().Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
		if n, ok := ev.Object.(*corev1.Node); ok {
			ev.Object = nodeMetadataOf(n)
		}
		return ev, true
	}), nil
}

func (g nodeMetadataGetter) Get(context.Context, string, metav1.GetOptions, ...string) (*metav1.PartialObjectMetadata, error) {
	return nil, errNodesOnly
}

func (g nodeMetadataGetter) Delete(context.Context, string, metav1.DeleteOptions, ...string) error {
	return errNodesOnly
}

func (g nodeMetadataGetter) DeleteCollection(context.Context, metav1.DeleteOptions, metav1.ListOptions) error {
	return errNodesOnly
}

func (g nodeMetadataGetter) Patch(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (*metav1.PartialObjectMetadata, error) {
	return nil, errNodesOnly
}

func nodeMetadataOf(n *corev1.Node) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: n.ObjectMeta,
	}
}
