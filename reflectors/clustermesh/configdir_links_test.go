package clustermesh

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/internal/syncbuf"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/tables"
)

// A dangling link in the clustermesh config directory (a cluster's file
// pointing at a Secret key that is not there) is logged with its path and
// target once, not at every look. (It was once skipped without a word.)
func TestDanglingLinkInConfigDirIsLoggedOnce(t *testing.T) {
	w, err := tables.New(statedb.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var log syncbuf.Buffer
	src, err := reflectors.NewSource(w, lb.SourceKVStore, slog.New(slog.NewTextHandler(&log, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink("..data/c2", filepath.Join(dir, "c2")); err != nil {
		t.Fatal(err)
	}
	im, err := NewImporter(Self{Name: "c1", ID: 1})
	if err != nil {
		t.Fatal(err)
	}
	d := newConfigDir(dir, DefaultConfig, im, src)
	for range 3 {
		if remotes, _, err := d.load(); err != nil || len(remotes) != 0 {
			t.Fatalf("load: %v, %v; want no cluster and no error", remotes, err)
		}
	}
	want := `msg="A link in the clustermesh config directory points to nothing; skipped until its target exists" source=kvstore path=` +
		filepath.Join(dir, "c2") + " target=..data/c2"
	if n := strings.Count(log.String(), "points to nothing"); n != 1 || !strings.Contains(log.String(), want) {
		t.Fatalf("%d lines, want one: %s\n%s", n, want, log.String())
	}
}
