package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// simulate --zone Z gives exactly the tables and maps (IDs included) of
// the same manifests with the node's manifest in zone Z: what an agent in
// that zone writes.
func TestZoneOverrideEqualsNodeInZone(t *testing.T) {
	dir := t.TempDir()
	entries, err := os.ReadDir("../../examples/demo")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join("../../examples/demo", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "node.yaml" {
			if !bytes.Contains(data, []byte("zone-a")) {
				t.Fatal("the demo's node is no longer in zone-a")
			}
			data = []byte(strings.ReplaceAll(string(data), "zone-a", "zone-b"))
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	simulate := func(args ...string) string {
		var stdout, stderr bytes.Buffer
		if code := run(append([]string{"simulate", "--maps", "-o", "json"}, args...), &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		return stdout.String()
	}
	overridden, moved := simulate("-f", "../../examples/demo", "--zone", "zone-b"), simulate("-f", dir)
	if overridden != moved {
		t.Errorf("--zone zone-b differs from a node manifest in zone-b:\n--- --zone\n%s\n--- manifest\n%s", overridden, moved)
	}
	if overridden == simulate("-f", "../../examples/demo") {
		t.Error("--zone zone-b changed nothing: the test shows nothing")
	}
}
