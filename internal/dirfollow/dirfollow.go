// Package dirfollow follows a directory that a source reads its input
// from (the manifests directory, the clustermesh config directory): it
// watches the directory (and, if asked, its tree) with inotify, and its
// parent, which sees the directory itself moved away, removed or made
// again; it waits for a burst of changes to settle, and then asks its
// user to look, at the files that changed or at everything. A directory
// that is gone is looked for again until it is back, and what it
// declared is the user's to keep meanwhile.
//
//	err := dirfollow.Follow(ctx, dirfollow.Config{Dir: dir, What: "the manifests directory", Log: log},
//		func(paths []string, rescan bool) { ... })
//
// Reading the files is the user's: with internal/boundedfile; Links logs
// the dangling links it finds, once each.
package dirfollow

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/lbstate/lbstate/internal/boundedfile"
)

// Config says what to follow, and how.
type Config struct {
	// Dir is the directory; What names it in log lines ("the manifests
	// directory").
	Dir, What string
	// Tree follows the directories below Dir too, but those SkipDir
	// (if set) leaves out; root is Dir as walked.
	Tree    bool
	SkipDir func(path, root string) bool
	// Match says whether a changed file is to be looked at alone; a
	// change of any other path asks for a look at everything. Nil: every
	// change does.
	Match func(path string) bool
	// Debounce is how long a burst of changes is left to settle, at most
	// MaxDelay while changes keep coming.
	Debounce, MaxDelay time.Duration
	// Poll, if set, asks for a look at everything this often anyway
	// (files the directory names may live elsewhere); GonePoll is how
	// often a directory that is gone is looked for.
	Poll, GonePoll time.Duration
	Log            *slog.Logger
}

// Look is called, from Follow's goroutine, after each burst of changes
// while the directory is there: with rescan, to look at everything (the
// first call does), else at paths, sorted.
type Look func(paths []string, rescan bool)

// follower is one Follow's state.
type follower struct {
	cfg      Config
	abs      string // the directory, absolute: how the parent's events name it
	w        *fsnotify.Watcher
	rootID   boundedfile.ID
	attached bool

	// What the next look takes.
	paths     map[string]bool // the files events named
	rescan    bool            // a directory changed, or events were lost
	checkRoot bool            // the directory itself changed
}

// Follow follows cfg.Dir until ctx is done. It fails only if it cannot
// follow the directory at the start.
func Follow(ctx context.Context, cfg Config, look Look) error {
	abs, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return err
	}
	f := &follower{cfg: cfg, abs: abs, paths: map[string]bool{}, rescan: true}
	defer f.close()
	if err := f.attach(); err != nil {
		return err
	}
	doLook := func() {
		if f.checkRoot {
			f.lookAtRoot()
		}
		switch {
		case !f.attached:
		case f.rescan:
			look(nil, true)
		case len(f.paths) > 0:
			look(slices.Sorted(maps.Keys(f.paths)), false)
		}
		clear(f.paths)
		f.rescan, f.checkRoot = false, false
	}
	doLook()
	var poll <-chan time.Time
	if cfg.Poll > 0 {
		t := time.NewTicker(cfg.Poll)
		defer t.Stop()
		poll = t.C
	}
	var debounce <-chan time.Time
	var first time.Time // of the changes waiting
	for {
		var gone <-chan time.Time
		if !f.attached {
			gone = time.After(cfg.GonePoll)
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
				cfg.Log.Warn("Watching "+cfg.What, "dir", cfg.Dir, "error", err)
				continue
			}
			f.rescan = true // events were lost
		case <-gone:
			f.checkRoot = true
			doLook()
			continue
		case <-poll:
			f.rescan = true
			doLook()
			continue
		case <-debounce:
			debounce = nil
			doLook()
			continue
		}
		if debounce == nil {
			first = time.Now()
		}
		debounce = time.After(max(0, min(cfg.Debounce, cfg.MaxDelay-time.Since(first))))
	}
}

// note records what an event asks the next look to do, and says whether
// it concerns the directory.
func (f *follower) note(ev fsnotify.Event) bool {
	switch name := ev.Name; {
	case name == f.cfg.Dir || name == f.abs:
		f.checkRoot = true
	case !f.within(name): // another entry of the parent
		return false
	case f.cfg.Tree && ev.Has(fsnotify.Create) && isDir(name) && !f.skipDir(name, f.cfg.Dir):
		if err := f.addDirs(f.w, name); err != nil { // a whole tree may have moved in
			f.cfg.Log.Warn("Watching a new directory", "dir", name, "error", err)
		}
		f.rescan = true
	case f.cfg.Match != nil && f.cfg.Match(name):
		f.paths[name] = true
	default: // a directory gone or renamed, a mounted volume's ..data swapped
		f.rescan = true
	}
	return true
}

// within says whether an event's path is below the directory; the tree's
// events name paths as the directory was given, the parent's absolute.
func (f *follower) within(name string) bool {
	if !filepath.IsAbs(f.cfg.Dir) {
		return !filepath.IsAbs(name)
	}
	return strings.HasPrefix(name, f.cfg.Dir+string(filepath.Separator))
}

// lookAtRoot follows the directory again when it is another one than the
// one watched (moved away, or removed, and made again), and says when it
// is gone.
func (f *follower) lookAtRoot() {
	log := f.cfg.Log
	fi, err := os.Stat(f.cfg.Dir)
	if err != nil || !fi.IsDir() {
		if f.attached {
			f.attached = false
			log.Warn(capitalized(f.cfg.What)+" is gone; what it declared stays until it is back", "dir", f.cfg.Dir)
		}
		return
	}
	if f.attached && boundedfile.IDOf(fi).SameFile(f.rootID) && slices.Contains(f.w.WatchList(), f.cfg.Dir) {
		return
	}
	if err := f.attach(); err != nil {
		log.Warn("Following "+f.cfg.What, "dir", f.cfg.Dir, "error", err)
		return
	}
	log.Info("Following "+f.cfg.What+" again", "dir", f.cfg.Dir)
	f.rescan = true
}

// attach watches the directory (its tree) and its parent with a new
// watcher.
func (f *follower) attach() error {
	fi, err := os.Stat(f.cfg.Dir)
	if err != nil {
		return err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	if parent := filepath.Dir(f.abs); parent != f.abs {
		if err := w.Add(parent); err != nil { // then only polling sees the directory come back
			f.cfg.Log.Debug("Not watching the directory's parent", "what", f.cfg.What, "dir", parent, "error", err)
		}
	}
	root := f.cfg.Dir + string(filepath.Separator) // a link to a directory is followed
	if f.cfg.Tree {
		err = f.addDirs(w, root)
	} else {
		err = w.Add(root)
	}
	if err != nil {
		w.Close()
		return err
	}
	f.close()
	f.w, f.rootID, f.attached = w, boundedfile.IDOf(fi), true
	return nil
}

func (f *follower) close() {
	if f.w != nil {
		f.w.Close()
	}
}

func (f *follower) skipDir(path, root string) bool {
	return f.cfg.SkipDir != nil && f.cfg.SkipDir(path, root)
}

// addDirs watches root and every directory below it.
func (f *follower) addDirs(w *fsnotify.Watcher, root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if f.skipDir(path, root) {
				return filepath.SkipDir
			}
			return w.Add(path)
		}
		return nil
	})
}

func capitalized(s string) string {
	if s == "" {
		return "The directory"
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}
