package kubeapi

import (
	"context"
	"fmt"
	"os"

	"github.com/cilium/hive/script"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
)

// ScriptCommands returns k8s/add, k8s/update and k8s/delete, which apply
// Kubernetes manifests (Services, EndpointSlices, Nodes, Pods, and with
// c.Dynamic the CRD-backed kinds among kinds; several per file, separated
// by ---) to the clients, typically client-go's fake ones, whose
// informers an API feed watches.
func ScriptCommands(c Clients, kinds ...FeedKind) map[string]script.Cmd {
	m := newManifestKinds(kinds)
	cmd := func(verb string) script.Cmd {
		return script.Command(
			script.CmdUsage{Summary: verb + " Kubernetes objects from YAML files", Args: "file..."},
			func(s *script.State, args ...string) (script.WaitFunc, error) {
				if len(args) == 0 {
					return nil, script.ErrUsage
				}
				for _, file := range args {
					data, err := os.ReadFile(s.Path(file))
					if err != nil {
						return nil, err
					}
					objs, err := m.decode(file, data)
					if err != nil {
						return nil, err
					}
					for _, obj := range objs {
						if err := m.apply(s.Context(), c, verb, obj); err != nil {
							return nil, fmt.Errorf("%s: %w", file, err)
						}
					}
				}
				return nil, nil
			})
	}
	return map[string]script.Cmd{
		"k8s/add":    cmd("add"),
		"k8s/update": cmd("update"),
		"k8s/delete": cmd("delete"),
	}
}

// DecodeManifests decodes a multi-document YAML (or JSON) manifest of
// client-go's kinds and the CRD-backed ones among kinds. Errors name the
// manifest and the line: "name:LINE: ...".
func DecodeManifests(name string, data []byte, kinds ...FeedKind) ([]runtime.Object, error) {
	return newManifestKinds(kinds).decode(name, data)
}

// manifestKinds decodes client-go's kinds and the CRD-backed kinds a
// script applies.
type manifestKinds struct {
	codecs serializer.CodecFactory
	crds   map[string]FeedKind // by kind
}

func newManifestKinds(kinds []FeedKind) manifestKinds {
	s := runtime.NewScheme()
	utilruntime.Must(scheme.AddToScheme(s))
	m := manifestKinds{crds: map[string]FeedKind{}}
	for _, k := range kinds {
		if k.IsCRD() {
			utilruntime.Must(k.AddToScheme(s))
			m.crds[k.Kind] = k
		}
	}
	m.codecs = serializer.NewCodecFactory(s)
	return m
}

// decode decodes a multi-document YAML (or JSON) manifest into Kubernetes
// objects. Errors name the manifest and the line: "name:LINE: ...".
func (m manifestKinds) decode(name string, data []byte) ([]runtime.Object, error) {
	var out []runtime.Object
	for _, doc := range SplitManifest(data) {
		obj, _, err := m.codecs.UniversalDeserializer().Decode(doc.Data, nil, nil)
		if err != nil {
			return nil, doc.Error(name, err)
		}
		out = append(out, obj)
	}
	return out, nil
}

func (m manifestKinds) apply(ctx context.Context, clients Clients, verb string, obj runtime.Object) error {
	c := clients.Client
	gvk := obj.GetObjectKind().GroupVersionKind()
	if k, ok := m.crds[gvk.Kind]; ok {
		// Stored in the preferred version, as an API server stores every
		// version of a CRD in one.
		gvr := k.versions[0]
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return err
		}
		uo := &unstructured.Unstructured{Object: u}
		uo.SetAPIVersion(gvr.GroupVersion().String())
		uo.SetKind(gvk.Kind)
		if uo.GetNamespace() == "" {
			uo.SetNamespace("default")
		}
		if clients.Dynamic == nil {
			return fmt.Errorf("%s %s/%s: no dynamic client", gvk.Kind, uo.GetNamespace(), uo.GetName())
		}
		return applyTo(ctx, dynamicClient{clients.Dynamic.Resource(gvr).Namespace(uo.GetNamespace())}, verb, uo)
	}
	switch o := obj.(type) {
	case *corev1.Service:
		return applyTo(ctx, c.CoreV1().Services(o.Namespace), verb, o)
	case *discoveryv1.EndpointSlice:
		return applyTo(ctx, c.DiscoveryV1().EndpointSlices(o.Namespace), verb, o)
	case *corev1.Node:
		return applyTo(ctx, c.CoreV1().Nodes(), verb, o)
	case *corev1.Pod:
		return applyTo(ctx, c.CoreV1().Pods(o.Namespace), verb, o)
	}
	return fmt.Errorf("%T: not a Service, EndpointSlice, Node, Pod or a CRD-backed kind asked for", obj)
}

// dynamicClient is a dynamic client's resource as a typedClient.
type dynamicClient struct{ dynamic.ResourceInterface }

func (c dynamicClient) Create(ctx context.Context, u *unstructured.Unstructured, o metav1.CreateOptions) (*unstructured.Unstructured, error) {
	return c.ResourceInterface.Create(ctx, u, o)
}

func (c dynamicClient) Update(ctx context.Context, u *unstructured.Unstructured, o metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	return c.ResourceInterface.Update(ctx, u, o)
}

// typedClient is what client-go's typed clients (Services(ns), Nodes(),
// ...) have in common.
type typedClient[T metav1.Object] interface {
	Create(context.Context, T, metav1.CreateOptions) (T, error)
	Update(context.Context, T, metav1.UpdateOptions) (T, error)
	Delete(context.Context, string, metav1.DeleteOptions) error
}

func applyTo[T metav1.Object](ctx context.Context, c typedClient[T], verb string, obj T) error {
	var err error
	switch verb {
	case "add":
		_, err = c.Create(ctx, obj, metav1.CreateOptions{})
	case "update":
		_, err = c.Update(ctx, obj, metav1.UpdateOptions{})
	default:
		err = c.Delete(ctx, obj.GetName(), metav1.DeleteOptions{})
	}
	return err
}

func (c dynamicClient) Delete(ctx context.Context, name string, o metav1.DeleteOptions) error {
	return c.ResourceInterface.Delete(ctx, name, o)
}
