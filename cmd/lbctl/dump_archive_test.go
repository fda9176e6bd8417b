package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// An archive of entries compressed apart (a gzip member each) is one
// tar.gz to tar and gzip: the entries in order, each whole; a missing
// entry is left out.
func TestArchiveOfMembersReadsAsOneTarGz(t *testing.T) {
	spool := t.TempDir()
	want := map[string]string{
		manifestEntry:               `{"format":"lbstate-dump"}`,
		mapsEntry:                   strings.Repeat(`{"id":1},`, 100_000),
		tablesDir + "backends.json": "[]",
	}
	for name, body := range want {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(spool, name)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(spool, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "dump.tar.gz")
	if _, err := writeArchive(path, spool, []string{manifestEntry, mapsEntry, metricsEntry, tablesDir + "backends.json"}); err != nil {
		t.Fatal(err)
	}
	tarBin, err := exec.LookPath("tar")
	if err != nil {
		t.Skip("no tar on this machine")
	}
	out, err := exec.Command(tarBin, "-tzf", path).CombinedOutput()
	if got := strings.Fields(string(out)); err != nil || strings.Join(got, " ") != manifestEntry+" "+mapsEntry+" "+tablesDir+"backends.json" {
		t.Fatalf("tar -tzf: %v: %s", err, out)
	}
	dir := t.TempDir()
	if out, err := exec.Command(tarBin, "-xzf", path, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("tar -xzf: %v: %s", err, out)
	}
	for name, body := range want {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(got) != body {
			t.Errorf("%s: %d bytes (%v), want %d", name, len(got), err, len(body))
		}
	}
}
