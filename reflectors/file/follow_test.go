package file

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lbstate/lbstate/internal/syncbuf"
)

// A directory tree moved into the manifests directory is followed,
// including its nested subdirectories.
func TestFollowsTreeMovedIn(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	_, w, db, _, _ := startSource(t, root, slog.New(slog.DiscardHandler))
	_, initialized := w.Frontends().Initialized(db.ReadTxn())
	<-initialized

	tree := filepath.Join(outside, "team")
	nested := filepath.Join(tree, "nested")
	if err := os.MkdirAll(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(nested, "web.yaml"), strings.Replace(webYAML, "ENDPOINTS", "10.0.0.1", 1))
	if err := os.Rename(tree, filepath.Join(root, "team")); err != nil {
		t.Fatal(err)
	}
	frontends(t, db, w, []string{"10.96.0.1:80/TCP -> 10.0.0.1:8080/TCP"})

	// Edit the file in the nested directory.
	write(t, filepath.Join(root, "team", "nested", "web.yaml"), strings.Replace(webYAML, "ENDPOINTS", "10.0.0.2", 1))
	frontends(t, db, w, []string{"10.96.0.1:80/TCP -> 10.0.0.2:8080/TCP"})
}

// The source stops once ctx is done, also while its scan is pushing more
// objects than the reflector's queue holds.
func TestStopsDuringLargeScan(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	const n = 12000
	for i := range n {
		fmt.Fprintf(&b, "apiVersion: v1\nkind: Service\nmetadata: {name: s%d}\nspec: {clusterIP: 10.96.%d.%d, ports: [{port: 80}]}\n---\n", i, i/256, i%256)
	}
	write(t, filepath.Join(dir, "many.yaml"), b.String())
	_, w, db, cancel, done := startSource(t, dir, slog.New(slog.DiscardHandler))
	deadline := time.Now().Add(60 * time.Second)
	for w.Services().NumObjects(db.ReadTxn()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("nothing applied in 60s")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatalf("the source did not stop 15s after ctx was cancelled (%d of %d services applied)", w.Services().NumObjects(db.ReadTxn()), n)
	}
}

// A directory mounted from a ConfigMap (kubelet's ..data symlink and
// timestamped directory) defines each object once.
func TestConfigMapMountDefinesEachObjectOnce(t *testing.T) {
	dir := t.TempDir()
	ts := filepath.Join(dir, "..2024_01_01_00_00_00.000000001")
	if err := os.Mkdir(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(ts, "web.yaml"), strings.Replace(webYAML, "ENDPOINTS", "10.0.0.1", 1))
	if err := os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..data", "web.yaml"), filepath.Join(dir, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	src, w, db, _, _ := startSource(t, dir, slog.New(slog.DiscardHandler))
	frontends(t, db, w, []string{"10.96.0.1:80/TCP -> 10.0.0.1:8080/TCP"})
	if src.Errors() != 0 {
		t.Fatalf("%d errors for a ConfigMap-mounted directory (each object seen twice)", src.Errors())
	}
}

// The manifests directory moved away and made again (or removed and made
// again) is followed again, and the log says so. The source once lost it
// for good after one log line.
func TestFollowsDirectoryRecreated(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "manifests")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "web.yaml"), strings.Replace(webYAML, "ENDPOINTS", "10.0.0.1", 1))
	var logs syncbuf.Buffer
	_, w, db, _, _ := startSource(t, dir, slog.New(slog.NewTextHandler(&logs, nil)))
	frontends(t, db, w, []string{"10.96.0.1:80/TCP -> 10.0.0.1:8080/TCP"})

	// Moved away: what it declared stays until the directory is back.
	if err := os.Rename(dir, filepath.Join(parent, "old")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	frontends(t, db, w, []string{"10.96.0.1:80/TCP -> 10.0.0.1:8080/TCP"})
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "web.yaml"), strings.Replace(webYAML, "ENDPOINTS", "10.0.0.2", 1))
	frontends(t, db, w, []string{"10.96.0.1:80/TCP -> 10.0.0.2:8080/TCP"})
	write(t, filepath.Join(dir, "web.yaml"), strings.Replace(webYAML, "ENDPOINTS", "10.0.0.3", 1))
	frontends(t, db, w, []string{"10.96.0.1:80/TCP -> 10.0.0.3:8080/TCP"})

	// Removed and made again.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "web.yaml"), strings.Replace(webYAML, "ENDPOINTS", "10.0.0.4", 1))
	frontends(t, db, w, []string{"10.96.0.1:80/TCP -> 10.0.0.4:8080/TCP"})
	if n := strings.Count(logs.String(), "Following the manifests directory again"); n != 2 {
		t.Fatalf("the log says %d times that the directory is followed again, want 2:\n%s", n, logs.String())
	}
}

// A bad file is reported once per version: not again when other files
// change or the directory is scanned again, but again when it changes and
// is still bad. Each rescan once logged and counted it again.
func TestBadFileReportedOncePerVersion(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "bad.yaml"), "apiVersion: v1\nkind: Service\nmetadata: {name: bad}\nspec: {clusterIp: 10.96.0.9}\n")
	write(t, filepath.Join(dir, "web.yaml"), strings.Replace(webYAML, "ENDPOINTS", "10.0.0.1", 1))
	src, w, db, _, _ := startSource(t, dir, slog.New(slog.DiscardHandler))
	frontends(t, db, w, []string{"10.96.0.1:80/TCP -> 10.0.0.1:8080/TCP"})
	if src.Errors() != 1 {
		t.Fatalf("%d errors, want 1", src.Errors())
	}
	// An edit of another file, and a new subdirectory (a full rescan).
	write(t, filepath.Join(dir, "web.yaml"), strings.Replace(webYAML, "ENDPOINTS", "10.0.0.2", 1))
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "sub", "web2.yaml"), strings.ReplaceAll(strings.Replace(
		strings.Replace(webYAML, "ENDPOINTS", "10.0.1.1", 1), "10.96.0.1", "10.96.0.2", 1), "web", "api"))
	frontends(t, db, w, []string{"10.96.0.1:80/TCP -> 10.0.0.2:8080/TCP", "10.96.0.2:80/TCP -> 10.0.1.1:8080/TCP"})
	if src.Errors() != 1 {
		t.Fatalf("%d errors after other changes, want still 1", src.Errors())
	}
	// A new bad version.
	write(t, filepath.Join(dir, "bad.yaml"), "apiVersion: v1\nkind: Service\nmetadata: {name: bad}\nspec: {prots: []}\n")
	deadline := time.Now().Add(5 * time.Second)
	for src.Errors() != 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if src.Errors() != 2 {
		t.Fatalf("%d errors after a new bad version, want 2", src.Errors())
	}
}

// In a live file, an invalid document keeps its object's last valid
// version while the file's other documents apply, and a document of a
// kind lbstate does not read is no error.
func TestInvalidDocumentKeepsLastValidVersion(t *testing.T) {
	dir := t.TempDir()
	web := filepath.Join(dir, "web.yaml")
	write(t, web, strings.Replace(webYAML, "ENDPOINTS", "10.0.0.1", 1))
	src, w, db, _, _ := startSource(t, dir, slog.New(slog.DiscardHandler))
	frontends(t, db, w, []string{"10.96.0.1:80/TCP -> 10.0.0.1:8080/TCP"})

	// The Service misspelt (and moved to another address, which must not
	// apply), the slice changed, and a CRD's object beside them.
	edited := strings.Replace(strings.Replace(webYAML, "ENDPOINTS", "10.0.0.2", 1), "clusterIP: 10.96.0.1", "clusterIp: 10.96.0.9", 1) +
		"---\napiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n"
	write(t, web, edited)
	frontends(t, db, w, []string{"10.96.0.1:80/TCP -> 10.0.0.2:8080/TCP"})
	if src.Errors() != 1 {
		t.Fatalf("%d errors, want 1 (the misspelt field)", src.Errors())
	}
}

// A manifests directory given as a link to a directory is served and
// followed. It once served nothing: the walk did not follow the link.
func TestFollowsLinkedDirectory(t *testing.T) {
	real, links := t.TempDir(), t.TempDir()
	write(t, filepath.Join(real, "web.yaml"), strings.Replace(webYAML, "ENDPOINTS", "10.0.0.1", 1))
	link := filepath.Join(links, "manifests")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	_, w, db, _, _ := startSource(t, link, slog.New(slog.DiscardHandler))
	frontends(t, db, w, []string{"10.96.0.1:80/TCP -> 10.0.0.1:8080/TCP"})
	write(t, filepath.Join(real, "web.yaml"), strings.Replace(webYAML, "ENDPOINTS", "10.0.0.2", 1))
	frontends(t, db, w, []string{"10.96.0.1:80/TCP -> 10.0.0.2:8080/TCP"})
}
