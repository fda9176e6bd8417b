package file

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lbstate/lbstate/internal/syncbuf"
)

// A dangling link in the manifests directory is logged once with its path
// and target, not at every rescan, and what it names is read once the
// target exists. (It was once skipped without a word.)
func TestDanglingLinkInManifestsIsLoggedOnce(t *testing.T) {
	dir, elsewhere := t.TempDir(), t.TempDir()
	target := filepath.Join(elsewhere, "api.yaml")
	if err := os.Symlink(target, filepath.Join(dir, "api.yaml")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "web.yaml"), strings.Replace(webYAML, "ENDPOINTS", "10.0.0.1", 1))
	var log syncbuf.Buffer
	_, w, db, _, _ := startSource(t, dir, slog.New(slog.NewTextHandler(&log, nil)))
	frontends(t, db, w, []string{"10.96.0.1:80/TCP -> 10.0.0.1:8080/TCP"})
	const msg = `msg="A link in the manifests directory points to nothing; skipped until its target exists"`
	if n := strings.Count(log.String(), msg); n != 1 || !strings.Contains(log.String(), "path="+filepath.Join(dir, "api.yaml")+" target="+target) {
		t.Fatalf("%d lines naming the link and its target, want 1:\n%s", n, log.String())
	}
	// A new subdirectory: a full rescan, which looks at the link again.
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "sub", "db.yaml"), strings.ReplaceAll(strings.Replace(
		strings.Replace(webYAML, "ENDPOINTS", "10.0.2.1", 1), "10.96.0.1", "10.96.0.3", 1), "web", "db"))
	frontends(t, db, w, []string{"10.96.0.1:80/TCP -> 10.0.0.1:8080/TCP", "10.96.0.3:80/TCP -> 10.0.2.1:8080/TCP"})
	if n := strings.Count(log.String(), msg); n != 1 {
		t.Fatalf("%d lines after a rescan, want still 1:\n%s", n, log.String())
	}
	// The target appears (outside the directory: only a rescan sees it).
	write(t, target, strings.ReplaceAll(strings.Replace(
		strings.Replace(webYAML, "ENDPOINTS", "10.0.1.1", 1), "10.96.0.1", "10.96.0.2", 1), "web", "api"))
	if err := os.Mkdir(filepath.Join(dir, "sub2"), 0o755); err != nil {
		t.Fatal(err)
	}
	frontends(t, db, w, []string{"10.96.0.1:80/TCP -> 10.0.0.1:8080/TCP", "10.96.0.2:80/TCP -> 10.0.1.1:8080/TCP", "10.96.0.3:80/TCP -> 10.0.2.1:8080/TCP"})
}
