package file

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/lbstate/lbstate/reflectors/kubeapi"
)

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
func (d decoder) decodeManifest(path string, data []byte) manifest {
	m := manifest{objs: map[objectKey]runtime.Object{}}
	for _, doc := range kubeapi.SplitManifest(data) {
		m.decode(d, path, doc)
	}
	return m
}

func (m *manifest) decode(d decoder, path string, doc kubeapi.ManifestDocument) {
	obj, _, err := d.strict.Decode(doc.Data, nil, nil)
	strict, isStrict := runtime.AsStrictDecodingError(err)
	switch {
	case runtime.IsNotRegisteredError(err):
		id := identify(doc.Data)
		if !d.scheme.IsVersionRegistered(id.groupVersion()) {
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
		if key, ok := id.key(d); ok {
			m.reject(key, doc.Error(path, fmt.Errorf("%s: %w", key, err)))
		} else {
			m.unknown = true
			m.errs = append(m.errs, doc.Error(path, err))
		}
		return
	}
	key, ok := d.keyOf(obj)
	if !ok {
		gvk := obj.GetObjectKind().GroupVersionKind()
		if want, reads := d.reads[gvk.Kind]; reads {
			id := identify(doc.Data)
			key, _ := id.key(d)
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
	kubeapi.SetOrigin(obj, path, doc.Start()) // for the sources' errors about it
	m.objs[key] = obj
}

// reject records an invalid document of a known object.
func (m *manifest) reject(key objectKey, err error) {
	m.invalid = append(m.invalid, key)
	m.errs = append(m.errs, err)
}

// builtinKinds are the built-in kinds a feed serves, by the group and
// version they are read in.
var builtinKinds = map[string]string{
	"Service":       corev1.SchemeGroupVersion.String(),
	"Pod":           corev1.SchemeGroupVersion.String(),
	"Node":          corev1.SchemeGroupVersion.String(),
	"EndpointSlice": discoveryv1.SchemeGroupVersion.String(),
}

var (
	unknownField   = regexp.MustCompile(`^(unknown|duplicate) field "(.+)"$`)
	lineOfDocument = regexp.MustCompile(`line (\d+): (.*)`)
)

// strictErrors places the unknown and repeated fields of an object.
func strictErrors(path string, doc kubeapi.ManifestDocument, key objectKey, errs []error) []error {
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
func fieldErrorAt(path string, doc kubeapi.ManifestDocument, what, field, msg string) error {
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
func (id identity) key(d decoder) (objectKey, bool) {
	if _, reads := d.reads[id.Kind]; !reads || id.Metadata.Name == "" {
		return objectKey{}, false
	}
	key := objectKey{id.Kind, id.Metadata.Namespace, id.Metadata.Name}
	if !d.clusterScoped[key.kind] {
		defaultNamespace(&key.namespace)
	}
	return key, true
}

// keyOf returns the key of an object of a kind read, defaulting its
// namespace.
func (d decoder) keyOf(obj runtime.Object) (objectKey, bool) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	kind := gvk.Kind
	want, reads := d.reads[kind]
	if !reads {
		return objectKey{}, false
	}
	// A built-in kind is read in one version; a CRD-backed one in every
	// version of its group that decodes (the subscriber reads each).
	wantGV, _ := schema.ParseGroupVersion(want)
	if _, builtin := builtinKinds[kind]; (builtin && gvk.GroupVersion() != wantGV) || gvk.Group != wantGV.Group {
		return objectKey{}, false
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return objectKey{}, false
	}
	if d.clusterScoped[kind] {
		return objectKey{kind, "", m.GetName()}, true
	}
	ns := m.GetNamespace()
	defaultNamespace(&ns)
	m.SetNamespace(ns)
	return objectKey{kind, ns, m.GetName()}, true
}

func defaultNamespace(ns *string) {
	if *ns == "" {
		*ns = "default"
	}
}

// objectKey names an object lbstate reads.
type objectKey struct{ kind, namespace, name string }

// id is the object's key among those of its kind.
func (k objectKey) id() string { return k.namespace + "/" + k.name }

// String is how errors name the object: "service default/web".
func (k objectKey) String() string {
	if k.namespace == "" {
		return strings.ToLower(k.kind) + " " + k.name
	}
	return strings.ToLower(k.kind) + " " + k.namespace + "/" + k.name
}
