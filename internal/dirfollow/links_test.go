package dirfollow

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lbstate/lbstate/internal/syncbuf"
)

// A dangling link is logged with its path and target once, however
// often it is looked at; again when its target changes, or when it
// dangles again after it was whole. A missing plain file is not logged.
func TestDanglingLinkIsLoggedOncePerTarget(t *testing.T) {
	dir := t.TempDir()
	var buf syncbuf.Buffer
	l := &Links{Log: slog.New(slog.NewTextHandler(&buf, nil)), What: "the manifests directory"}
	link := filepath.Join(dir, "svc.yaml")
	look := func() {
		if _, err := os.Stat(link); err != nil {
			l.Missing(link)
		} else {
			l.Present(link)
		}
	}
	lines := func() int {
		return strings.Count(buf.String(), `msg="A link in the manifests directory points to nothing; skipped until its target exists"`)
	}
	look() // no file at all
	l.Missing(filepath.Join(dir, "plain.yaml"))
	if n := lines(); n != 0 {
		t.Fatalf("%d lines for missing files that are no links:\n%s", n, buf.String())
	}
	if err := os.Symlink("../elsewhere/svc.yaml", link); err != nil {
		t.Fatal(err)
	}
	look()
	look()
	if n := lines(); n != 1 || !strings.Contains(buf.String(), "path="+link+" target=../elsewhere/svc.yaml") {
		t.Fatalf("%d lines, want one naming the path and the target:\n%s", n, buf.String())
	}
	// Another target: logged again.
	os.Remove(link)
	if err := os.Symlink("real.yaml", link); err != nil {
		t.Fatal(err)
	}
	look()
	if n := lines(); n != 2 || !strings.Contains(buf.String(), "target=real.yaml") {
		t.Fatalf("%d lines after the target changed, want 2:\n%s", n, buf.String())
	}
	// Whole, then dangling again: logged again.
	if err := os.WriteFile(filepath.Join(dir, "real.yaml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	look()
	os.Remove(filepath.Join(dir, "real.yaml"))
	look()
	look()
	if n := lines(); n != 3 {
		t.Fatalf("%d lines after the link dangled again, want 3:\n%s", n, buf.String())
	}
}
