package file

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

const (
	// debounceDelay is how long the source waits after the last change
	// before it looks: editors write a file in several steps.
	debounceDelay = 50 * time.Millisecond
	// maxDelay bounds that wait while changes keep coming.
	maxDelay = time.Second
	// pollInterval is how often the source looks for its directory while
	// it is gone, should the parent's events not say it is back.
	pollInterval = time.Second
)

// follower follows the directory for the source: the directory's tree,
// and its parent, which sees the directory itself moved away, removed or
// made again.
type follower struct {
	s        *source
	abs      string // the directory, absolute: how the parent's events name it
	w        *fsnotify.Watcher
	rootID   fileID
	attached bool

	// What the next look at the directory takes.
	paths     map[string]bool // the files events named
	rescan    bool            // a directory changed, or events were lost
	checkRoot bool            // the directory itself changed
}

// follow is the reflector's feed: a scan, then a look at what changed
// after each burst of events.
func (s *source) follow(ctx context.Context) error {
	abs, err := filepath.Abs(s.dir)
	if err != nil {
		return err
	}
	f := &follower{s: s, abs: abs, paths: map[string]bool{}}
	defer f.close()
	if err := f.attach(); err != nil {
		return err
	}
	// The source counts as synced only after a scan that read the whole
	// directory: an unreadable one must not look like an empty one.
	synced := false
	look := func() {
		if f.checkRoot {
			f.lookAtRoot()
		}
		switch {
		case !f.attached:
		case f.rescan || !synced:
			if s.rescan(ctx) == nil && !synced {
				s.r.Synced()
				synced = true
			}
		case len(f.paths) > 0:
			if s.updatePaths(slices.Sorted(maps.Keys(f.paths))) {
				s.rescan(ctx)
			}
		}
		clear(f.paths)
		f.rescan, f.checkRoot = false, false
	}
	look()
	var debounce <-chan time.Time
	var first time.Time // of the changes waiting
	for {
		var poll <-chan time.Time
		if !f.attached {
			poll = time.After(pollInterval)
		}
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-f.w.Events:
			if !ok {
				return nil
			}
			if !f.note(ev) {
				continue
			}
		case err := <-f.w.Errors:
			if !errors.Is(err, fsnotify.ErrEventOverflow) {
				s.src.Log().Warn("Watching the manifests directory", "dir", s.dir, "error", err)
				continue
			}
			f.rescan = true // events were lost
		case <-poll:
			f.checkRoot = true
			look()
			continue
		case <-debounce:
			debounce = nil
			look()
			continue
		}
		if debounce == nil {
			first = time.Now()
		}
		debounce = time.After(max(0, min(debounceDelay, maxDelay-time.Since(first))))
	}
}

// note records what an event asks the next look to do, and says whether
// it concerns the directory.
func (f *follower) note(ev fsnotify.Event) bool {
	switch name := ev.Name; {
	case name == f.s.dir || name == f.abs:
		f.checkRoot = true
	case !f.within(name): // another entry of the parent
		return false
	case ev.Has(fsnotify.Create) && isDir(name) && !skipDir(name, f.s.dir):
		if err := addDirs(f.w, name); err != nil { // a whole tree may have moved in
			f.s.src.Log().Warn("Watching a new directory", "dir", name, "error", err)
		}
		f.rescan = true
	case isManifest(name):
		f.paths[name] = true
	default: // a directory gone or renamed, a mounted ConfigMap's ..data swapped
		f.rescan = true
	}
	return true
}

// within says whether an event's path is below the directory; the tree's
// events name paths as the directory was given, the parent's absolute.
func (f *follower) within(name string) bool {
	if !filepath.IsAbs(f.s.dir) {
		return !filepath.IsAbs(name)
	}
	return strings.HasPrefix(name, f.s.dir+string(filepath.Separator))
}

// lookAtRoot follows the directory again when it is another one than the
// one watched (moved away, or removed, and made again), and says when it
// is gone. What it declared stays meanwhile.
func (f *follower) lookAtRoot() {
	log := f.s.src.Log()
	fi, err := os.Stat(f.s.dir)
	if err != nil || !fi.IsDir() {
		if f.attached {
			f.attached = false
			log.Warn("The manifests directory is gone; what it declared stays until it is back", "dir", f.s.dir)
		}
		return
	}
	if f.attached && idOf(fi).SameFile(f.rootID) && slices.Contains(f.w.WatchList(), f.s.dir) {
		return
	}
	if err := f.attach(); err != nil {
		log.Warn("Following the manifests directory", "dir", f.s.dir, "error", err)
		return
	}
	log.Info("Following the manifests directory again", "dir", f.s.dir)
	f.rescan = true
}

// attach watches the directory's tree and its parent with a new watcher.
func (f *follower) attach() error {
	fi, err := os.Stat(f.s.dir)
	if err != nil {
		return err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	if parent := filepath.Dir(f.abs); parent != f.abs {
		if err := w.Add(parent); err != nil { // then only polling sees the directory come back
			f.s.src.Log().Debug("Not watching the manifests directory's parent", "dir", parent, "error", err)
		}
	}
	if err := addDirs(w, walkRoot(f.s.dir)); err != nil {
		w.Close()
		return err
	}
	f.close()
	f.w, f.rootID, f.attached = w, idOf(fi), true
	return nil
}

func (f *follower) close() {
	if f.w != nil {
		f.w.Close()
	}
}

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

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}
