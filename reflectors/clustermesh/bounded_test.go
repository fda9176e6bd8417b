package clustermesh

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/internal/boundedfile"
	"github.com/lbstate/lbstate/internal/syncbuf"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/tables"
)

// within runs fn and fails the test if it has not returned in 5s (a
// reader blocked on a FIFO, or reading /dev/zero).
func within(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: still reading after 5s", what)
	}
}

// Every file the clustermesh source reads is bounded: a config file, or
// a TLS file it names, that is a FIFO or /dev/zero is refused at once
// with an error naming the file (and the field). Once, /dev/zero as
// trusted-ca-file took the agent to 4 GB in 6 s, and a FIFO blocked it.
func TestEtcdFileAndTheFilesItNamesAreReadBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.crt")
	if err := os.WriteFile(big, make([]byte, maxFileSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, config string
		want         error
		says         string
	}{
		{"config is a FIFO", "", boundedfile.ErrNotRegular, "fifo: not a regular file"},
		{"CA is a FIFO", "endpoints: [https://x:2379]\ntrusted-ca-file: fifo", boundedfile.ErrNotRegular, "trusted-ca-file"},
		{"CA is too large", "endpoints: [https://x:2379]\ntrusted-ca-file: big.crt", boundedfile.ErrTooLarge, "trusted-ca-file"},
		{"key is /dev/zero", "endpoints: [https://x:2379]\ncert-file: c2\nkey-file: /dev/zero", boundedfile.ErrNotRegular, "key-file"},
		{"CA is /dev/zero", "endpoints: [https://x:2379]\ntrusted-ca-file: /dev/zero", boundedfile.ErrNotRegular, "trusted-ca-file"},
		{"config is /dev/zero", "/dev/zero", boundedfile.ErrNotRegular, "/dev/zero: not a regular file"},
	} {
		path := fifo
		switch {
		case c.config == "/dev/zero":
			path = c.config
		case c.config != "":
			path = filepath.Join(dir, "c2")
			if err := os.WriteFile(path, []byte(c.config), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		within(t, c.name, func() { _, _, err = LoadEtcdFile(path) })
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want %v saying %q", c.name, err, c.want, c.says)
		}
	}
}

// A FIFO and a /dev/zero link in --clustermesh-config are reported by
// name and skipped; the clusters beside them are read. Once, the link
// took the agent to 4.8 GB, and the FIFO blocked the follower so that
// no new cluster connected.
func TestConfigDirSkipsAFIFOAndADeviceLink(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "c3"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "c4")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "c2"), []byte("endpoints: [http://127.0.0.1:2379]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := tables.New(statedb.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	log := &syncbuf.Buffer{}
	src, err := reflectors.NewSource(w, lb.SourceKVStore, slog.New(slog.NewTextHandler(log, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	im, err := NewImporter(Self{Name: "c1", ID: 1})
	if err != nil {
		t.Fatal(err)
	}
	d := newConfigDir(dir, DefaultConfig, im, src)
	var remotes []Remote
	within(t, "the initial read", func() { remotes = d.initial() })
	if len(remotes) != 1 || remotes[0].Name != "c2" {
		t.Errorf("clusters read: %v, want c2", remotes)
	}
	for _, name := range []string{"c3", "c4"} {
		if !strings.Contains(log.String(), filepath.Join(dir, name)+": not a regular file") {
			t.Errorf("%s not reported as not a regular file; log:\n%s", name, log.String())
		}
	}
	errs := src.Errors()
	within(t, "a second read", func() { d.sync() })
	if src.Errors() != errs {
		t.Errorf("the same refused files were reported again: %d errors, then %d", errs, src.Errors())
	}
}
