package boundedfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lbstate/lbstate/internal/boundedfile"
)

// Only regular files, or links to them, are read, up to the cap; a FIFO
// nobody writes to and /dev/zero are refused at once, with errors that
// name the file and the reason.
func TestReadRefusesWhatIsNotASmallRegularFile(t *testing.T) {
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	if err := os.WriteFile(path("small"), []byte("ok"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path("big"), make([]byte, 101), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(path("small"), path("link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", path("zero")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path("fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]error{"small": nil, "link": nil, "big": boundedfile.ErrTooLarge,
		"zero": boundedfile.ErrNotRegular, "fifo": boundedfile.ErrNotRegular} {
		done := make(chan struct{})
		var (
			data []byte
			err  error
		)
		go func() { defer close(done); data, _, err = boundedfile.Read(path(name), 100, "the test's cap") }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: reading it blocks", name)
		}
		switch {
		case want == nil && (err != nil || string(data) != "ok"):
			t.Errorf("%s: %q, %v", name, data, err)
		case want != nil && !errors.Is(err, want):
			t.Errorf("%s: %v, want %v", name, err, want)
		case want != nil && !strings.HasPrefix(err.Error(), path(name)+": "):
			t.Errorf("%s: error %q does not start with the path", name, err)
		}
	}
	if _, _, err := boundedfile.Read(path("big"), 100, "the test's cap"); err == nil || !strings.Contains(err.Error(), "101 bytes, over the test's cap (100 bytes)") {
		t.Errorf("big: %v, want its size and the cap", err)
	}
}
