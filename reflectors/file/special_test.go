package file

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/internal/syncbuf"
	"github.com/lbstate/lbstate/tables"
)

// waitInitialized fails the test if the source has not synced in 10s: a
// scan that hangs.
func waitInitialized(t *testing.T, w *tables.Writer, db *statedb.DB) {
	t.Helper()
	_, initialized := w.Frontends().Initialized(db.ReadTxn())
	select {
	case <-initialized:
	case <-time.After(10 * time.Second):
		t.Fatal("the source did not sync in 10s")
	}
}

// waitStopped fails the test if the source has not stopped 10s after its
// context was cancelled.
func waitStopped(t *testing.T, cancel func(), done chan error) {
	t.Helper()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the source did not stop 10s after it was told to")
	}
}

// A FIFO named like a manifest, and a symlink to /dev/zero, are reported
// as not regular files and skipped: the scan neither hangs on the FIFO
// nor reads /dev/zero until memory runs out, the other files apply, edits
// are followed, and the source stops when told. The FIFO once blocked the
// scan forever (and SIGTERM for 60s); /dev/zero crashed the agent.
func TestNonRegularFilesAreSkipped(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "web.yaml"), strings.Replace(webYAML, "ENDPOINTS", "10.0.0.1", 1))
	if err := syscall.Mkfifo(filepath.Join(dir, "x.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero.yaml")); err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	src, w, db, cancel, done := startSource(t, dir, slog.New(slog.NewTextHandler(&logs, nil)))
	waitInitialized(t, w, db)
	frontends(t, db, w, []string{"10.96.0.1:80/TCP -> 10.0.0.1:8080/TCP"})
	for _, name := range []string{"x.yaml: not a regular file", "zero.yaml: not a regular file"} {
		if !strings.Contains(logs.String(), name) {
			t.Errorf("the log does not say %q:\n%s", name, logs.String())
		}
	}
	if src.Errors() != 2 {
		t.Errorf("%d errors, want 2", src.Errors())
	}
	write(t, filepath.Join(dir, "web.yaml"), strings.Replace(webYAML, "ENDPOINTS", "10.0.0.2", 1))
	frontends(t, db, w, []string{"10.96.0.1:80/TCP -> 10.0.0.2:8080/TCP"})
	waitStopped(t, cancel, done)
}

// A file over the size cap is reported with its size and the flag that
// sets the cap, and not read; the other files apply.
func TestFileOverSizeCapIsRejected(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "web.yaml"), strings.Replace(webYAML, "ENDPOINTS", "10.0.0.1", 1))
	big := strings.Replace(strings.ReplaceAll(webYAML, "web", "big"), "10.96.0.1", "10.96.0.2", 1)
	big = strings.Replace(big, "ENDPOINTS", "10.0.0.9", 1) + strings.Repeat("# padding\n", 200)
	write(t, filepath.Join(dir, "big.yaml"), big)
	var logs syncbuf.Buffer
	src, w, db := startSourceWith(t, dir, slog.New(slog.NewTextHandler(&logs, nil)), 1024)
	waitInitialized(t, w, db)
	frontends(t, db, w, []string{"10.96.0.1:80/TCP -> 10.0.0.1:8080/TCP"})
	if want := "big.yaml: 2"; !strings.Contains(logs.String(), want) || !strings.Contains(logs.String(), "--manifests-max-file-size") || src.Errors() != 1 {
		t.Fatalf("%d errors; want one, naming the file, its size and --manifests-max-file-size:\n%s", src.Errors(), logs.String())
	}
}

// --manifests-max-file-size takes a Kubernetes quantity above zero.
func TestMaxFileSizeFlag(t *testing.T) {
	for in, want := range map[string]int64{"16Mi": 16 << 20, "512Ki": 512 << 10, "1000": 1000, "0": 0, "-1Mi": 0, "lots": 0} {
		got, err := Config{ManifestsMaxFileSize: in}.maxFileSize()
		if got != want || (err != nil) != (want == 0) {
			t.Errorf("%q: %d, %v; want %d", in, got, err, want)
		}
		if err != nil && !strings.Contains(err.Error(), "--manifests-max-file-size") {
			t.Errorf("%q: %v does not name the flag", in, err)
		}
	}
}
