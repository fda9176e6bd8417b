package dirfollow_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lbstate/lbstate/internal/dirfollow"
	"github.com/lbstate/lbstate/internal/syncbuf"
)

// looks records Follow's calls of Look.
type looks struct {
	mu    sync.Mutex
	calls []string // "rescan", or the paths joined
}

func (l *looks) look(paths []string, rescan bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if rescan {
		l.calls = append(l.calls, "rescan")
		return
	}
	l.calls = append(l.calls, strings.Join(paths, ","))
}

// waitFor waits until a call satisfies cond, and forgets the calls.
func (l *looks) waitFor(t *testing.T, what string, cond func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l.mu.Lock()
		found := slices.ContainsFunc(l.calls, cond)
		if found {
			l.calls = nil
		}
		l.mu.Unlock()
		if found {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no look: %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling, with the deadline above
	}
}

// A flat directory (the clustermesh config directory): the first look is
// at everything; a matching file's change is looked at alone, another
// change asks for everything; the directory removed and made again is
// followed again, and the log says so.
func TestFollowsAFlatDirectoryAndItsRecreation(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "configs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var log syncbuf.Buffer
	l := &looks{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- dirfollow.Follow(ctx, dirfollow.Config{
			Dir: dir, What: "the test directory",
			Match:    func(p string) bool { return strings.HasSuffix(p, ".yaml") },
			Debounce: 10 * time.Millisecond, MaxDelay: 100 * time.Millisecond, GonePoll: 20 * time.Millisecond,
			Log: slog.New(slog.NewTextHandler(&log, nil)),
		}, l.look)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Follow: %v", err)
		}
	})
	l.waitFor(t, "the first, at everything", func(c string) bool { return c == "rescan" })

	a := filepath.Join(dir, "a.yaml")
	if err := os.WriteFile(a, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	l.waitFor(t, "at a.yaml alone", func(c string) bool { return c == a })
	if err := os.WriteFile(filepath.Join(dir, "b.crt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	l.waitFor(t, "at everything after b.crt", func(c string) bool { return c == "rescan" })

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(log.String(), "Following the test directory again") {
		if time.Now().After(deadline) {
			t.Fatalf("the log does not say the directory is followed again:\n%s", log.String())
		}
		time.Sleep(5 * time.Millisecond) // polling, with the deadline above
	}
	l.waitFor(t, "at everything once it is back", func(c string) bool { return c == "rescan" })
	if err := os.WriteFile(a, []byte("y"), 0o600); err != nil {
		t.Fatal(err)
	}
	l.waitFor(t, "at a.yaml in the new directory", func(c string) bool { return c == a })
}

// Follow fails at the start if there is no directory to follow.
func TestFollowFailsWithoutTheDirectory(t *testing.T) {
	err := dirfollow.Follow(context.Background(), dirfollow.Config{Dir: filepath.Join(t.TempDir(), "none"), Log: slog.New(slog.DiscardHandler)},
		func([]string, bool) { t.Error("looked at a directory that is not there") })
	if !os.IsNotExist(err) {
		t.Errorf("Follow of a missing directory: %v", err)
	}
}
