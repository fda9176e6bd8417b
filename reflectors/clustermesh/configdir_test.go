package clustermesh

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A file added to the config directory connects its cluster, a changed
// one reconnects it keeping its backends, a removed one disconnects it
// and removes its backends at once; a bad file or a cluster claiming
// this cluster's name is reported and changes nothing.
func TestConfigDirConnectsReconnectsAndDisconnects(t *testing.T) {
	f := newFixture(t, true)
	f.put(ClusterConfigKey("c2"), `{"id":2,"capabilities":{}}`)
	f.put(ServiceKey("c2", "default", "web"), c2Web)
	dir := t.TempDir()
	im, err := NewImporter(Self{Name: "c1", ID: 1})
	if err != nil {
		t.Fatal(err)
	}
	d := newConfigDir(dir, DefaultConfig, im, f.src)
	im.initial = d.initial()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); im.Start(ctx, f.src); d.follow(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	web := func() []string { return backendsOf(f.w, f.db, "web") }

	if err := f.srv.WriteClientConfig(filepath.Join(dir, "c2"), nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "c2 added", webWithC2, web)

	// Changed (a comment counts): connected anew, its backends kept.
	data, _ := os.ReadFile(filepath.Join(dir, "c2"))
	if err := os.WriteFile(filepath.Join(dir, "c2"), append(data, "# rotated\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	waitForLog(t, f.log, "Remote cluster's configuration changed, connecting again")
	if got := web(); !slices.Equal(got, webWithC2) {
		t.Errorf("after a reconnect: %q", got)
	}

	// A file that is not a config beside it (a certificate), a broken
	// config and a cluster named as this one: reported, nothing moves.
	errs := f.src.Errors()
	os.WriteFile(filepath.Join(dir, "c2.crt"), []byte("-----BEGIN CERTIFICATE-----\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "c3"), []byte("endpoints: [\n"), 0o600)
	if err := f.srv.WriteClientConfig(filepath.Join(dir, "c1"), nil); err != nil {
		t.Fatal(err)
	}
	waitForLog(t, f.log, "that is this cluster's name")
	waitFor(t, "the broken c3 reported", func() bool { return f.src.Errors() >= errs+2 })
	if got := im.Connected(); !slices.Equal(got, []string{"c2"}) {
		t.Errorf("connected: %q, want c2 alone", got)
	}
	if strings.Contains(f.log.String(), "BEGIN CERTIFICATE") {
		t.Error("a certificate reached the log")
	}

	// Removed: its backends go at once, whatever the stale timeout.
	if err := os.Remove(filepath.Join(dir, "c2")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "c2 removed", webAlone, web) // within 5s; the stale timeout is 30s
}
