package file

import (
	"context"
	"time"

	"github.com/lbstate/lbstate/internal/dirfollow"
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

// follow hands the subscribers the directory: a scan, then a look at what changed
// after each burst of events (internal/dirfollow follows the directory's
// tree, and the directory itself moved away, removed or made again).
func (s *Feed) follow(ctx context.Context) error {
	// The feed counts as synced only after a scan that read the whole
	// directory: an unreadable one must not look like an empty one.
	synced := false
	look := func(paths []string, rescan bool) {
		switch {
		case rescan || !synced:
			if s.rescan(ctx) == nil && !synced {
				s.fan.MarkSynced()
				synced = true
			}
		case s.updatePaths(paths):
			s.rescan(ctx)
		}
	}
	return dirfollow.Follow(ctx, dirfollow.Config{
		Dir: s.dir, What: "the manifests directory",
		Tree: true, SkipDir: skipDir, Match: isManifest,
		Debounce: debounceDelay, MaxDelay: maxDelay, GonePoll: pollInterval,
		Log: s.rep.Log(),
	}, look)
}
