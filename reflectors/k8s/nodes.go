package k8s

import (
	"context"
	"errors"
	"unique"

	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/lbstate/lbstate/reflectors/kubeapi"
)

// Every node's labels give the backends on it their topology values
// (lb.ServiceParams.TopologyKeys), so the source watches all Nodes, but
// as metadata only: an informer of PartialObjectMetadata, trimmed to the
// name and labels, costs a fraction of a full Node (whose status holds
// images, conditions and addresses) for each of thousands of nodes. The
// local node keeps its own full informer, for its addresses.

var nodesResource = corev1.SchemeGroupVersion.WithResource("nodes")

// nodeLabelsInformers returns the informers of Nodes' metadata, trimmed
// to what selection reads.
func nodeLabelsInformers(conn *kubeapi.Connection, client metadata.Interface) *kubeapi.Informers {
	return kubeapi.MetadataInformers(conn, client, labelsOnly)
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

// prepareNodeLabels records a node's labels (or that it is gone) as a
// Writer call. The Writer compares them with what it has, so an event
// that changed something else costs one lookup.
func (r *Reflector) prepareNodeLabels(call func(func(statedb.WriteTxn)), name string, labels map[string]string, deleted bool) {
	if deleted {
		call(func(txn statedb.WriteTxn) { r.check(r.w.DeleteNode(txn, name), "node "+name) })
		return
	}
	call(func(txn statedb.WriteTxn) { r.check(r.w.SetNodeLabels(txn, name, labels), "node "+name) })
}

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
	return nodeMetadataGetter{c.client, gvr == nodesResource}
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
