package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lbstate/lbstate/bpf"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// golden compares got with testdata/NAME, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s:\n--- got\n%s--- want\n%s", path, got, want)
	}
}

func TestSimulateGolden(t *testing.T) {
	for _, tc := range []struct {
		golden string
		args   []string
	}{
		{"simulate-demo.txt", nil},
		{"simulate-demo-zone-b.txt", []string{"--zone", "zone-b"}},
		{"simulate-demo.json", []string{"-o", "json"}},
		{"simulate-demo-maps.txt", []string{"--maps", "--algorithm", "maglev"}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"simulate", "-f", "../../examples/demo"}, tc.args...)
			if code := run(args, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			golden(t, tc.golden, stdout.Bytes())
		})
	}
}

// -o json with --maps gives the view and the dump in one object.
func TestSimulateJSONWithMaps(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"simulate", "-f", "../../examples/demo", "-o", "json", "--maps"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var out struct {
		Frontends []frontendView `json:"frontends"`
		Maps      struct {
			Services []json.RawMessage `json:"services"`
		} `json:"maps"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Frontends) != 14 || len(out.Maps.Services) == 0 {
		t.Fatalf("%d frontends, %d service entries", len(out.Frontends), len(out.Maps.Services))
	}
}

// explain points clients inside the cluster to the internal twin.
func TestExplainInternalTwin(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"explain", "-f", "../../examples/demo", "192.0.2.1:443/TCP"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "clients inside the cluster use 192.0.2.1:443/TCP/i") {
		t.Errorf("no hint about the internal twin:\n%s", stdout.String())
	}
}

// simulate and explain -f build the Maglev tables the agent would, by
// default: of the agent's size.
func TestOfflineCommandsUseTheAgentsMaglevTableSize(t *testing.T) {
	size := fmt.Sprint(bpf.DefaultConfig.LBMaglevTableSize)
	if maps := lbctl(t, "simulate", "-f", "../../examples/demo", "--maps"); !strings.Contains(maps, "maglev 10 size="+size+" ") {
		t.Errorf("simulate --maps: no table of %s slots for rev-NAT 10:\n%s", size, maps)
	}
	if out := lbctl(t, "explain", "-f", "../../examples/demo", "10.96.0.10:80/TCP"); !strings.Contains(out, "slot among "+size+" ") {
		t.Errorf("explain -f: not %s slots:\n%s", size, out)
	}
}

// Each frontend shows the name of its service port, which picks its
// backends.
func TestSimulatePrintsPortNames(t *testing.T) {
	var views []frontendView
	if err := json.Unmarshal([]byte(lbctl(t, "simulate", "-f", "../../examples/demo", "-o", "json")), &views); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range views {
		got[v.Frontend] = v.PortName
	}
	for fe, want := range map[string]string{"10.96.0.10:80/TCP": "http", "10.96.0.10:9090/TCP": "metrics", "10.96.0.53:53/UDP": "dns", "10.96.0.53:53/TCP": "dns-tcp"} {
		if got[fe] != want {
			t.Errorf("%s: port name %q, want %q", fe, got[fe], want)
		}
	}
	table := lbctl(t, "simulate", "-f", "../../examples/demo")
	if !strings.HasPrefix(table, "FRONTEND                  TYPE          SERVICE          PORTNAME  ALGORITHM") ||
		!regexp.MustCompile(`(?m)^10\.96\.0\.10:9090/TCP +ClusterIP +shop/web +metrics +maglev `).MatchString(table) {
		t.Errorf("no PORTNAME column:\n%s", table)
	}
}

// simulate -f on a directory holding a FIFO named like a manifest and a
// link to /dev/zero reports both and simulates the rest. It once hung
// reading the FIFO.
func TestSimulateSkipsFilesThatAreNotRegular(t *testing.T) {
	dir := t.TempDir()
	web, err := os.ReadFile("../../examples/demo/web.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "web.yaml"), web, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "x.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero.yaml")); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runWithin(t, 30*time.Second, "simulate", "-f", dir)
	if code != 0 || !strings.Contains(stdout, "10.96.0.10:80/TCP") {
		t.Fatalf("exit %d:\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"x.yaml: not a regular file (a FIFO)", "zero.yaml: not a regular file (a device)"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}
