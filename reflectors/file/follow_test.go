package file

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
