package kubeapi

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
)

// AnnotationManifestOrigin is set by a feed of manifests (a manifests
// directory) on every object it hands over: "FILE:LINE", the file and the
// line where the object's document starts. A source's errors about the
// object name it (AtOrigin), as the feed's own syntax errors do, so that
// a user fixing a file of many documents need not search for the object.
// Objects from an API server do not carry it.
const AnnotationManifestOrigin = "lbstate.io/manifest-origin"

// SetOrigin records on obj (a Kubernetes object) where a manifest
// declares it.
func SetOrigin(obj any, file string, line int) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return // not an object: nothing can name it
	}
	a := m.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[AnnotationManifestOrigin] = fmt.Sprintf("%s:%d", file, line)
	m.SetAnnotations(a)
}

// Origin returns where a manifest declares obj ("FILE:LINE"), or "" for
// an object that came from no manifest.
func Origin(obj any) string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return m.GetAnnotations()[AnnotationManifestOrigin]
}

// AtOrigin places err, about obj, where a manifest declares obj:
// "FILE:LINE: err". It returns err as it is for an object from no
// manifest, and nil for nil; errors.Is and errors.As see err through it.
func AtOrigin(obj any, err error) error { return AtOriginOf(Origin(obj), err) }

// AtOriginOf is AtOrigin for an origin already read (Origin), for a
// source that keeps it beside its own form of the object.
func AtOriginOf(origin string, err error) error {
	if err == nil || origin == "" {
		return err
	}
	return fmt.Errorf("%s: %w", origin, err)
}
