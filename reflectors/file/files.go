package file

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/lbstate/lbstate/tables"
)

// fileState is what the source made of one version of a file.
type fileState struct {
	id     fileID
	read   bool   // the content was read: sum is its hash
	sum    uint64 // to tell an edit from a touch
	failed string // why this version cannot be read, as reported
	// objs are what the file declares: its valid objects, and the last
	// valid versions of those its current version gets wrong.
	objs map[objectKey]runtime.Object
	lost map[objectKey]bool // objects an earlier file declares too, reported
}

var contentSeed = maphash.MakeSeed()

// update looks at the file at path again and returns the objects whose
// declaration may have changed. A rescan reads only a file whose ID
// changed; a file an event named (force) is read, but decoded again only
// if its content changed. rescan is set when path is a directory.
func (s *Feed) update(path string, force bool) (affected []objectKey, rescan bool) {
	old := s.files[path]
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		s.links.Missing(path) // a dangling link is logged
		return s.setFile(path, nil), false
	case err != nil:
		s.failed(path, fileID{}, err)
		return nil, false
	}
	s.links.Present(path)
	if fi.IsDir() { // no file any more; what is in it takes a rescan
		return s.setFile(path, nil), true
	}
	if old != nil && old.id == idOf(fi) && !force {
		return nil, false
	}
	data, id, err := readRegular(path, fi, s.maxFileSize)
	if err != nil {
		s.failed(path, id, err)
		return nil, false
	}
	sum := maphash.Bytes(contentSeed, data)
	if old != nil && old.read && old.sum == sum {
		updated := *old
		updated.id = id
		s.files[path] = &updated
		return nil, false
	}
	m := s.dec.decodeManifest(path, data)
	for _, err := range m.errs {
		s.rep.Reject(tables.AsInvalid(err))
	}
	if len(m.skipped) > 0 {
		s.rep.Log().Debug("Skipped documents of kinds lbstate does not read", "file", path, "kinds", m.skipped)
	}
	if old != nil { // never give up what worked for what does not
		for _, key := range m.invalid {
			if obj, ok := old.objs[key]; ok && m.objs[key] == nil {
				m.objs[key] = obj
			}
		}
		if m.unknown {
			for key, obj := range old.objs {
				if _, ok := m.objs[key]; !ok {
					m.objs[key] = obj
				}
			}
		}
	}
	return s.setFile(path, &fileState{id: id, read: true, sum: sum, objs: m.objs}), false
}

// failed reports that a file cannot be read, once for each version of it,
// and keeps what it declared.
func (s *Feed) failed(path string, id fileID, err error) {
	old := s.files[path]
	if old != nil && old.id == id && old.failed == err.Error() {
		return
	}
	s.rep.Reject(tables.AsInvalid(err)) // the file is the user's input
	st := &fileState{id: id, failed: err.Error(), objs: map[objectKey]runtime.Object{}}
	if old != nil {
		st.objs, st.lost = old.objs, old.lost
	}
	s.files[path] = st
}

// setFile records what the file at path declares (nil: it is gone) and
// returns the objects whose declaration may have changed.
func (s *Feed) setFile(path string, st *fileState) []objectKey {
	old := s.files[path]
	var affected []objectKey
	if old != nil {
		for key := range old.objs {
			affected = append(affected, key)
			if st == nil || st.objs[key] == nil {
				s.owners[key] = slices.DeleteFunc(s.owners[key], func(p string) bool { return p == path })
			}
		}
	}
	if st == nil {
		delete(s.files, path)
		return affected
	}
	s.files[path] = st
	for key := range st.objs {
		affected = append(affected, key)
		if i, found := slices.BinarySearch(s.owners[key], path); !found {
			s.owners[key] = slices.Insert(s.owners[key], i, path)
		}
	}
	return affected
}

// publish hands the subscribers what changed of the affected objects, in
// a fixed order so that they (and the reconciler's IDs) see the same
// sequence every time: deletions first, then the rest. The first file (in
// name order) that declares an object wins.
func (s *Feed) publish(affected []objectKey) {
	slices.SortFunc(affected, compareKeys)
	affected = slices.Compact(affected)
	for _, key := range affected {
		if len(s.owners[key]) == 0 {
			delete(s.owners, key)
			if _, ok := s.known[key]; ok {
				s.fan.Delete(key.kind, key.id(), nil)
				delete(s.known, key)
			}
		}
	}
	for _, key := range affected {
		owners := s.owners[key]
		if len(owners) == 0 {
			continue
		}
		winner := s.files[owners[0]]
		delete(winner.lost, key)
		for _, path := range owners[1:] {
			if st := s.files[path]; !st.lost[key] {
				s.rep.Reject(tables.Invalidf(path, key.String(), "defined in an earlier file too (%s), which wins", owners[0]))
				if st.lost == nil {
					st.lost = map[objectKey]bool{}
				}
				st.lost[key] = true
			}
		}
		obj := winner.objs[key]
		if old, ok := s.known[key]; !ok || !equality.Semantic.DeepEqual(old, obj) {
			s.fan.Set(key.kind, key.id(), obj)
			s.known[key] = obj
		}
	}
}

// updatePaths looks at the files events named. It returns whether one of
// them is a directory, which takes a rescan.
func (s *Feed) updatePaths(paths []string) (rescan bool) {
	var affected []objectKey
	for _, path := range paths {
		a, dir := s.update(path, true)
		affected = append(affected, a...)
		rescan = rescan || dir
	}
	s.publish(affected)
	return rescan
}

// rescan walks the directory and looks at every file again: reading only
// those whose ID changed, forgetting those gone. If the directory cannot
// be walked, nothing is forgotten and the error is reported (once while
// it lasts) and returned.
func (s *Feed) rescan(ctx context.Context) error {
	seen := map[string]bool{}
	var affected []objectKey
	err := filepath.WalkDir(walkRoot(s.dir), func(path string, d fs.DirEntry, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDir(path, s.dir) {
				return filepath.SkipDir
			}
			return nil
		}
		if isManifest(path) {
			seen[path] = true
			a, _ := s.update(path, false)
			affected = append(affected, a...)
		}
		return nil
	})
	if err == nil {
		for _, path := range slices.Sorted(maps.Keys(s.files)) {
			if !seen[path] {
				affected = append(affected, s.setFile(path, nil)...)
			}
		}
	}
	s.publish(affected)
	switch {
	case err == nil:
		s.walkFailed = ""
	case ctx.Err() != nil:
	case err.Error() != s.walkFailed:
		s.walkFailed = err.Error()
		// The directory is the user's input; what was read stays.
		s.rep.Reject(tables.AsInvalid(fmt.Errorf("reading the manifests directory %s: %w", s.dir, err)))
	}
	return err
}

// walkRoot is the directory to walk: with a trailing separator, a link
// to a directory is followed (filepath.WalkDir follows none, and a linked
// directory once served nothing).
func walkRoot(dir string) string { return dir + string(filepath.Separator) }

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

// skipDir leaves out kubelet's "..<timestamp>" directories of a mounted
// ConfigMap: their files are read through the mount's symlinks.
func skipDir(path, root string) bool {
	return filepath.Clean(path) != filepath.Clean(root) && strings.HasPrefix(filepath.Base(path), "..")
}
