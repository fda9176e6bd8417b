package dirfollow

import (
	"log/slog"
	"os"
)

// Links reports the dangling links of a followed directory. A link whose
// target does not exist reads as a missing file, which its user skips;
// whoever made it should still learn why nothing it names is read (a
// typo in the target, a volume not mounted). Each is logged once, and
// again when its target changes or once it was seen whole. The zero
// value is ready to use, with Log and What set.
type Links struct {
	Log  *slog.Logger
	What string // the directory, in log lines ("the manifests directory")

	reported map[string]string // path -> the target logged
}

// maxReported bounds what Links remembers (a link removed while
// dangling is never looked at again); past it, it forgets everything, and
// links still dangling are logged once more.
const maxReported = 1024

// Missing is called for a path in the directory that os.Stat found
// missing: if it is a link, it is logged with its target, unless it was
// with that target already.
func (l *Links) Missing(path string) {
	target, err := os.Readlink(path)
	if err != nil { // not a link, or gone itself
		l.Present(path)
		return
	}
	if t, ok := l.reported[path]; ok && t == target {
		return
	}
	if l.reported == nil || len(l.reported) >= maxReported {
		l.reported = map[string]string{}
	}
	l.reported[path] = target
	l.Log.Warn("A link in "+l.What+" points to nothing; skipped until its target exists", "path", path, "target", target)
}

// Present is called for a path that os.Stat found (or that is gone):
// should it dangle again, it is logged again.
func (l *Links) Present(path string) {
	delete(l.reported, path)
}
