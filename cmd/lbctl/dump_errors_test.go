package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lbstate/lbstate/api"
)

// writeTarGz writes entries (name, content) as a tar.gz at path.
func writeTarGz(t *testing.T, path string, entries ...string) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for i := 0; i < len(entries); i += 2 {
		tw.WriteHeader(&tar.Header{Name: entries[i], Mode: 0o600, Size: int64(len(entries[i+1]))})
		tw.Write([]byte(entries[i+1]))
	}
	tw.Close()
	zw.Close()
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// An archive lbctl cannot read, or flags that contradict --dump, are
// refused with what is wrong and how to fix it.
func TestDumpReadErrorsSayWhatIsWrong(t *testing.T) {
	tmp := t.TempDir()
	plain := filepath.Join(tmp, "plain.txt")
	os.WriteFile(plain, []byte("not an archive"), 0o600)
	newer := filepath.Join(tmp, "newer.tar.gz")
	writeTarGz(t, newer, manifestEntry, `{"format": "lbstate-dump", "version": 99}`)
	other := filepath.Join(tmp, "other.tar.gz")
	writeTarGz(t, other, manifestEntry, `{"format": "cilium-bugtool", "version": 1}`)
	noMaps := filepath.Join(tmp, "nomaps.tar.gz")
	writeTarGz(t, noMaps, manifestEntry, `{"format": "lbstate-dump", "version": 1, "tables": ["frontends"],
		"missing": {"maps/dump.json": "the agent does not serve it", "history/": "`+noHistory+`"}}`, tablesDir+"frontends.json", "[\n]\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"frontends", "--dump", plain}, "not a tar.gz of lbctl dump"},
		{[]string{"frontends", "--dump", newer}, "layout version 99; this lbctl reads versions 1 to 2 (a newer lbctl wrote it)"},
		{[]string{"maps", "--dump", other}, `format "cilium-bugtool", want "lbstate-dump"`},
		{[]string{"maps", "--dump", noMaps}, "has no maps/dump.json: the agent does not serve it"},
		{[]string{"services", "--dump", noMaps}, `no table "services" in the dump (it has frontends)`},
		{[]string{"frontends", "--dump", noMaps, "--api", "http://127.0.0.1:1"}, "give --api or --dump, not both"},
		{[]string{"maps", "--dump", noMaps, "--lb-pin-dir", tmp}, "--dump reads an archive: drop --lb-pin-dir and --api"},
		{[]string{"frontends", "--dump", noMaps, "--watch"}, "a dump does not change: drop --watch"},
		{[]string{"simulate", "--dump", noMaps, "-f", tmp}, "give -f DIR or --dump FILE, not both"},
		{[]string{"explain", "10.96.0.1:80/TCP", "--dump", noMaps, "-f", tmp}, "-f explains manifests, --dump an agent's archive: give one"},
		{[]string{"dump"}, "-o FILE is required"},
		{[]string{"history", "--dump", noMaps}, "has no history/history.json: " + noHistory},
		{[]string{"history", "--dump", noMaps, "--watch"}, "--dump reads an archive: give neither --api nor --watch"},
		{[]string{"history", "shop"}, `"shop": want a FRONTEND (10.96.0.1:80/TCP) or a SERVICE (namespace/name)`},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(c.args, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("lbctl %s: exit %d, %q; want 1 and %q", strings.Join(c.args, " "), code, stderr.String(), c.want)
		}
	}
	// A listing of a table the dump has, empty, reads as the agent's.
	var stdout, stderr bytes.Buffer
	if code := run([]string{"frontends", "--dump", noMaps, "-o", "json"}, &stdout, &stderr); code != 0 || stdout.String() != "[]\n" {
		t.Errorf("frontends of an empty table: %d %q %q", code, stdout.String(), stderr.String())
	}
}

// An agent that mounts the tables and maps only (api.Register, no
// RegisterAgent) is dumped without its version, flags and metrics; the
// manifest says why, and the rest reads back as the agent answered.
func TestDumpOfAnAgentWithoutAgentInfoSaysWhatIsMissing(t *testing.T) {
	p := explainPipeline(t, "../../examples/demo", "random")
	mux := http.NewServeMux()
	api.Register(mux, slog.New(slog.DiscardHandler), p.db, p.maps)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	archive := filepath.Join(t.TempDir(), "dump.tar.gz")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"dump", "--api", srv.URL, "-o", archive}, &stdout, &stderr); code != 0 {
		t.Fatalf("dump: %d %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "lbctl dump: no agent.json") || !strings.Contains(stderr.String(), "lbctl dump: no metrics.txt") {
		t.Errorf("dump did not say what it left out: %s", stderr.String())
	}
	entries := readArchive(t, archive)
	for _, missing := range []string{agentEntry, metricsEntry} {
		if _, ok := entries[missing]; ok {
			t.Errorf("%s is in the archive", missing)
		}
		if !strings.Contains(entries[manifestEntry], `"`+missing+`": "the agent does not serve it`) {
			t.Errorf("the manifest does not say why %s is missing:\n%s", missing, entries[manifestEntry])
		}
	}
	if got, want := lbctlOut(t, "frontends", "--dump", archive), lbctlOut(t, "frontends", "--api", srv.URL); got != want {
		t.Errorf("frontends --dump:\n%s\nlive:\n%s", got, want)
	}
}
