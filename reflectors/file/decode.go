package file

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/lbstate/lbstate/reflectors/k8s"
	"github.com/lbstate/lbstate/reflectors/redirectpolicy"
	"github.com/lbstate/lbstate/reflectors/routes"
)

// kinds are client-go's, CiliumLocalRedirectPolicy, the Gateway API's
// and SMI's TrafficSplit.
var kinds = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(scheme.AddToScheme(s))
	utilruntime.Must(redirectpolicy.AddToScheme(s))
	utilruntime.Must(routes.AddToScheme(s))
	return s
}()

// strictDecoder decodes the kinds of kinds, rejecting unknown and
// repeated fields, as `kubectl apply --validate` does.
var strictDecoder = serializer.NewCodecFactory(kinds, serializer.EnableStrict).UniversalDeserializer()

// manifest is what one version of a file declares.
type manifest struct {
	objs map[objectKey]runtime.Object // the valid objects of the kinds lbstate reads
	// invalid are the objects whose documents were rejected: their last
	// valid versions stay.
	invalid []objectKey
	// unknown is set when a document was rejected that cannot even be
	// named: everything the file declared before stays.
	unknown bool
	errs    []error
	skipped []string // the kinds of other documents: "apps/v1 Deployment"
}

// decodeManifest decodes the documents of a file. Each document stands
// alone: an invalid one is an error (naming path, line, object and field)
// and leaves the others be; one of a kind lbstate does not read (a
// Deployment, a CRD's object) is skipped.
func decodeManifest(path string, data []byte) manifest {
	m := manifest{objs: map[objectKey]runtime.Object{}}
	for _, doc := range k8s.SplitManifest(data) {
		m.decode(path, doc)
	}
	return m
}

func (m *manifest) decode(path string, doc k8s.ManifestDocument) {
	obj, _, err := strictDecoder.Decode(doc.Data, nil, nil)
	strict, isStrict := runtime.AsStrictDecodingError(err)
	switch {
	case runtime.IsNotRegisteredError(err):
		id := identify(doc.Data)
		if !kinds.IsVersionRegistered(id.groupVersion()) {
			m.skipped = append(m.skipped, id.APIVersion+" "+id.Kind) // not lbstate's
			return
		}
		m.unknown = true // a typo: the object may well be one lbstate reads
		m.errs = append(m.errs, doc.Error(path, fmt.Errorf("kind %q is not a kind of %s", id.Kind, id.APIVersion)))
		return
	case runtime.IsMissingKind(err):
		m.unknown = true
		m.errs = append(m.errs, doc.Error(path, errors.New("kind: missing")))
		return
	case runtime.IsMissingVersion(err):
		m.unknown = true
		m.errs = append(m.errs, doc.Error(path, errors.New("apiVersion: missing")))
		return
	case err != nil && !isStrict:
		id := identify(doc.Data)
		if key, ok := id.key(); ok {
			m.reject(key, doc.Error(path, fmt.Errorf("%s: %w", key, err)))
		} else {
			m.unknown = true
			m.errs = append(m.errs, doc.Error(path, err))
		}
		return
	}
	key, ok := keyOf(obj)
	if !ok {
		gvk := obj.GetObjectKind().GroupVersionKind()
		if want, reads := readKinds[gvk.Kind]; reads {
			id := identify(doc.Data)
			key, _ := id.key()
			m.reject(key, doc.Error(path, fmt.Errorf("%s: apiVersion %s: lbstate reads %s in %s", key, gvk.GroupVersion(), gvk.Kind, want)))
		} else {
			m.skipped = append(m.skipped, gvk.GroupVersion().String()+" "+gvk.Kind)
		}
		return
	}
	if key.name == "" {
		m.unknown = true
		m.errs = append(m.errs, fieldErrorAt(path, doc, strings.ToLower(key.kind), "metadata.name", "missing"))
		return
	}
	var errs []error
	if isStrict {
		errs = strictErrors(path, doc, key, strict.Errors())
	}
	for _, fe := range validate(obj) {
		errs = append(errs, fieldErrorAt(path, doc, key.String(), fe.path, fe.msg))
	}
	if _, dup := m.objs[key]; dup {
		m.errs = append(m.errs, doc.Error(path, fmt.Errorf("%s: defined earlier in this file too, which wins", key)))
		return
	}
	if len(errs) > 0 {
		m.invalid = append(m.invalid, key)
		m.errs = append(m.errs, errs...)
		return
	}
	m.objs[key] = obj
}

// reject records an invalid document of a known object.
func (m *manifest) reject(key objectKey, err error) {
	m.invalid = append(m.invalid, key)
	m.errs = append(m.errs, err)
}

// readKinds are the kinds lbstate reads, by the group and version it reads
// them in.
var readKinds = map[string]string{
	"Service":           corev1.SchemeGroupVersion.String(),
	"Pod":               corev1.SchemeGroupVersion.String(),
	"Node":              corev1.SchemeGroupVersion.String(),
	"EndpointSlice":     discoveryv1.SchemeGroupVersion.String(),
	redirectpolicy.Kind: redirectpolicy.SchemeGroupVersion.String(),
	"HTTPRoute":         routes.GatewayGroup + "/v1",
	"GRPCRoute":         routes.GatewayGroup + "/v1",
	"TCPRoute":          routes.GatewayGroup + "/v1",
	"UDPRoute":          routes.GatewayGroup + "/v1",
	"ReferenceGrant":    routes.GatewayGroup + "/v1",
	"TrafficSplit":      routes.SMIGroup + "/" + routes.SMIVersions[0],
}

var (
	unknownField   = regexp.MustCompile(`^(unknown|duplicate) field "(.+)"$`)
	lineOfDocument = regexp.MustCompile(`line (\d+): (.*)`)
)

// strictErrors places the unknown and repeated fields of an object.
func strictErrors(path string, doc k8s.ManifestDocument, key objectKey, errs []error) []error {
	var out []error
	for _, err := range errs {
		if m := unknownField.FindStringSubmatch(err.Error()); m != nil {
			out = append(out, fieldErrorAt(path, doc, key.String(), m[2], m[1]+" field"))
			continue
		}
		// YAML's own errors, one per line: "line N: key "type" already set in map".
		found := false
		for _, m := range lineOfDocument.FindAllStringSubmatch(err.Error(), -1) {
			n, _ := strconv.Atoi(m[1])
			out = append(out, fmt.Errorf("%s:%d: %s: %s", path, doc.Line+n-1, key, m[2]))
			found = true
		}
		if !found {
			out = append(out, doc.Error(path, fmt.Errorf("%s: %w", key, err)))
		}
	}
	return out
}

// fieldErrorAt is "path:LINE: what: field: msg", on the field's line.
func fieldErrorAt(path string, doc k8s.ManifestDocument, what, field, msg string) error {
	return fmt.Errorf("%s:%d: %s: %s: %s", path, doc.Line+fieldLine(doc.Data, field)-1, what, field, msg)
}

// identity is what names a document, read leniently from one that does
// not decode.
type identity struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

func identify(doc []byte) identity {
	var id identity
	yaml.Unmarshal(doc, &id) // what cannot be read stays empty
	return id
}

func (id identity) groupVersion() schema.GroupVersion {
	gv, _ := schema.ParseGroupVersion(id.APIVersion)
	return gv
}

// key is the object the document would be, if it is of a kind lbstate
// reads and has a name.
func (id identity) key() (objectKey, bool) {
	if _, reads := readKinds[id.Kind]; !reads || id.Metadata.Name == "" {
		return objectKey{}, false
	}
	key := objectKey{id.Kind, id.Metadata.Namespace, id.Metadata.Name}
	if key.kind != "Node" {
		defaultNamespace(&key.namespace)
	}
	return key, true
}

// keyOf returns the key of an object lbstate reads, defaulting its
// namespace.
func keyOf(obj runtime.Object) (objectKey, bool) {
	switch o := obj.(type) {
	case *corev1.Service:
		defaultNamespace(&o.Namespace)
		return objectKey{"Service", o.Namespace, o.Name}, true
	case *discoveryv1.EndpointSlice:
		defaultNamespace(&o.Namespace)
		return objectKey{"EndpointSlice", o.Namespace, o.Name}, true
	case *corev1.Pod:
		defaultNamespace(&o.Namespace)
		return objectKey{"Pod", o.Namespace, o.Name}, true
	case *corev1.Node:
		return objectKey{"Node", "", o.Name}, true
	case *redirectpolicy.Policy:
		defaultNamespace(&o.Namespace)
		return objectKey{redirectpolicy.Kind, o.Namespace, o.Name}, true
	}
	if key, ok := routes.KeyOf(obj); ok {
		if m, ok := obj.(interface{ SetNamespace(string) }); ok {
			m.SetNamespace(key.Namespace) // defaulted
		}
		return objectKey{key.Kind, key.Namespace, key.Name}, true
	}
	return objectKey{}, false
}

func defaultNamespace(ns *string) {
	if *ns == "" {
		*ns = "default"
	}
}

// objectKey names an object lbstate reads.
type objectKey struct{ kind, namespace, name string }

// String is how errors name the object: "service default/web".
func (k objectKey) String() string {
	if k.namespace == "" {
		return strings.ToLower(k.kind) + " " + k.name
	}
	return strings.ToLower(k.kind) + " " + k.namespace + "/" + k.name
}
