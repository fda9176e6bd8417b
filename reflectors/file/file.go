// Package file is a source of load-balancing state that needs no cluster:
// a directory of Kubernetes manifests (Services, EndpointSlices, Nodes,
// Pods; several documents per file). It feeds the same reflector, and so
// the same conversions, as the Kubernetes source, declaring as the file
// source, and follows edits, new files and deletions as they happen. Cell
// serves the directory named by --manifests.
package file

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/reflectors/k8s"
)

// source reads a manifests directory into a reflector.
type source struct {
	dir string
	r   *k8s.Reflector
	src *reflectors.Source

	byFile map[string]map[objectKey]runtime.Object // the last good objects of each file
	known  map[objectKey]runtime.Object            // what the reflector has been given
}

type objectKey struct{ kind, namespace, name string }

// newSource returns a source reading dir as the file source, converting
// with cfg, reporting through src.
func newSource(dir string, cfg k8s.Config, src *reflectors.Source) (*source, error) {
	r, err := k8s.NewReflector(cfg, src, lb.SourceFile)
	if err != nil {
		return nil, err
	}
	return &source{dir: dir, r: r, src: src, byFile: map[string]map[objectKey]runtime.Object{}, known: map[objectKey]runtime.Object{}}, nil
}

// run reads the directory, marks the source synced once that is applied,
// and follows changes until ctx is done.
func (s *source) run(ctx context.Context) error { return s.r.Run(ctx, s.follow) }

// follow is the reflector's feed: a scan, then one more after each burst
// of changes.
func (s *source) follow(ctx context.Context) error {
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer watcher.Close()
	if err := s.watchDirs(watcher); err != nil {
		return err
	}
	// The source counts as synced only after a scan that read the whole
	// directory: an unreadable one must not look like an empty one.
	synced := false
	scan := func() {
		if s.scan() == nil && !synced {
			s.r.Synced()
			synced = true
		}
	}
	scan()
	var debounce <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-watcher.Events:
			if !ok {
				return nil
			}
			if ev.Has(fsnotify.Create) {
				if fi, err := os.Stat(ev.Name); err == nil && fi.IsDir() {
					addDirs(watcher, ev.Name) // a whole tree may have moved in
				}
			}
			// Editors write in several steps: wait for them to finish.
			debounce = time.After(debounceDelay)
		case err := <-watcher.Errors:
			s.src.Log().Warn("Watching the manifests directory", "dir", s.dir, "error", err)
		case <-debounce:
			scan()
		}
	}
}

// debounceDelay is how long a scan waits after the last change: editors
// write a file in several steps.
const debounceDelay = 50 * time.Millisecond

func (s *source) watchDirs(w *fsnotify.Watcher) error { return addDirs(w, s.dir) }

// addDirs watches root and every directory below it.
func addDirs(w *fsnotify.Watcher, root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDir(path, root) {
				return filepath.SkipDir
			}
			return w.Add(path)
		}
		return nil
	})
}

// skipDir leaves out kubelet's "..<timestamp>" directories of a mounted
// ConfigMap: their files are read through the mount's symlinks.
func skipDir(path, root string) bool {
	return path != root && strings.HasPrefix(filepath.Base(path), "..")
}

// scan reads the directory and hands the reflector what changed since the
// last scan. A file that cannot be decoded is reported by name and line
// and keeps contributing what it held before; the other files apply. If
// the directory cannot be read, nothing changes and the error is
// returned.
func (s *source) scan() error {
	current := map[string]map[objectKey]runtime.Object{}
	err := filepath.WalkDir(s.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDir(path, s.dir) {
				return filepath.SkipDir
			}
			return nil
		}
		if !isManifest(path) {
			return nil
		}
		objs, err := readManifests(path)
		if err != nil {
			s.src.Reject(err)
			if old, ok := s.byFile[path]; ok {
				current[path] = old
			}
			return nil
		}
		current[path] = objs
		return nil
	})
	if err != nil {
		s.src.Reject(fmt.Errorf("reading the manifests directory %s: %w", s.dir, err))
		return err
	}
	s.byFile = current

	// The first file (in name order) that defines an object wins.
	desired := map[objectKey]runtime.Object{}
	for _, path := range slices.Sorted(maps.Keys(current)) {
		for key, obj := range current[path] {
			if _, dup := desired[key]; dup {
				s.src.Reject(fmt.Errorf("%s: %s %s/%s: defined in an earlier file too, which wins", path, key.kind, key.namespace, key.name))
				continue
			}
			desired[key] = obj
		}
	}
	// In a fixed order, so that the reflector (and the reconciler's IDs)
	// see the same sequence every time.
	for _, key := range slices.SortedFunc(maps.Keys(s.known), compareKeys) {
		if _, ok := desired[key]; !ok {
			s.r.Push(s.known[key], true)
			delete(s.known, key)
		}
	}
	for _, key := range slices.SortedFunc(maps.Keys(desired), compareKeys) {
		obj := desired[key]
		if old, ok := s.known[key]; !ok || !equality.Semantic.DeepEqual(old, obj) {
			s.r.Push(obj, false)
			s.known[key] = obj
		}
	}
	return nil
}

func compareKeys(a, b objectKey) int {
	return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.name, b.name))
}

func isManifest(path string) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml", ".json":
		return !strings.HasPrefix(filepath.Base(path), ".")
	}
	return false
}

// readManifests decodes the Services, EndpointSlices, Nodes and Pods of a
// file (k8s.DecodeManifests: errors name the file and line).
func readManifests(path string) (map[objectKey]runtime.Object, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	objs, err := k8s.DecodeManifests(path, data)
	if err != nil {
		return nil, err
	}
	out := map[objectKey]runtime.Object{}
	for _, obj := range objs {
		if key, ok := keyOf(obj); ok { // other kinds are not lbstate's
			out[key] = obj
		}
	}
	return out, nil
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
	}
	return objectKey{}, false
}

func defaultNamespace(ns *string) {
	if *ns == "" {
		*ns = "default"
	}
}
