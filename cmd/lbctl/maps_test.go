package main

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// lbctl runs lbctl and fails the test unless it succeeds.
func lbctl(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("lbctl %v: exit %d: %s", args, code, stderr.String())
	}
	return stdout.String()
}

// localDump is what lbctl maps prints for m in format.
func localDump(t *testing.T, m *bpf.Maps, format string) string {
	t.Helper()
	d, err := bpf.TakeDump(m)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if format == "json" {
		d.WriteJSON(&out)
	} else {
		d.WriteText(&out)
	}
	return out.String()
}

// masters lists the frontends that have a master entry in m.
func masters(t *testing.T, m *bpf.Maps) []string {
	t.Helper()
	d, err := bpf.TakeDump(m)
	if err != nil {
		t.Fatal(err)
	}
	var fes []string
	for _, s := range d.Services {
		if s.Slot == 0 {
			fes = append(fes, s.Frontend.String())
		}
	}
	return fes
}

// An agent on in-memory maps serves their dump; lbctl maps and explain
// print from it what they print from the maps themselves.
func TestMapsAndExplainOverTheAPIMatchTheMaps(t *testing.T) {
	weighted := t.TempDir()
	if err := os.WriteFile(filepath.Join(weighted, "svc.yaml"), []byte(explainManifests), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		p      *pipeline
		srcs   []string
		covers []string // what the explanations must include between them
	}{
		{"demo maglev", demoPipeline(t, "maglev"), []string{"", "192.0.2.77:40000", "192.0.2.78:40001"},
			[]string{"hashes to slot", "slot among 251", "standby (existing flows only)", "clients inside the cluster use"}},
		{"ranges and affinity", explainPipeline(t, weighted, "random"), []string{"", "203.0.113.1:1000", "198.51.100.20:1000"},
			[]string{"random: a new flow", "DROPPED", "is pinned (for 10800s)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.p.maps
			if tc.name == "ranges and affinity" {
				fe := lb.MustParseL3n4Addr("192.0.2.9:443/TCP")
				master, _, _ := m.Services.Lookup(bpf.NewServiceKey(fe, 0))
				slot2, _, _ := bpf.SlotBackend(m.Services, fe, master, 2)
				m.Affinity.Update(bpf.AffinityKey{Client: netip.MustParseAddr("198.51.100.20").As16(), RevNatID: master.RevNatID},
					bpf.AffinityValue{BackendID: slot2, LastUsed: monotonicSeconds()})
			}
			api := serveAgent(t, tc.p)
			for _, format := range []string{"text", "json"} {
				if got, want := lbctl(t, "maps", "--api", api, "-o", format), localDump(t, m, format); got != want {
					t.Errorf("lbctl maps -o %s over the API:\n%s\nthe maps:\n%s", format, got, want)
				}
			}
			fes := masters(t, m)
			if len(fes) < 3 {
				t.Fatalf("only %d frontends in the maps", len(fes))
			}
			var all strings.Builder
			for _, fe := range fes {
				for _, src := range tc.srcs {
					args := []string{"explain", fe, "--api", api}
					if src != "" {
						args = append(args, "--src", src)
					}
					got := lbctl(t, args...)
					if want := explainText(t, m, fe, src); got != want {
						t.Errorf("lbctl %v:\n%s\non the maps:\n%s", args, got, want)
					}
					all.WriteString(got)
				}
			}
			for _, want := range tc.covers {
				if !strings.Contains(all.String(), want) {
					t.Errorf("no explanation says %q:\n%s", want, all.String())
				}
			}
		})
	}
}

// Without --lb-pin-dir or --api, lbctl reads pinned maps when they are
// there, else the agent's dump.
func TestMapsDefaultToTheAgentWithoutPinnedMaps(t *testing.T) {
	p := demoPipeline(t, "maglev")
	api := serveAgent(t, p)
	setDefaults(t, t.TempDir(), api)
	if got, want := lbctl(t, "maps"), localDump(t, p.maps, "text"); got != want {
		t.Errorf("lbctl maps:\n%s\nwant:\n%s", got, want)
	}
	if out := lbctl(t, "explain", "10.96.0.10:80/TCP", "--src", "192.0.2.77:40000"); !strings.Contains(out, "hashes to slot") {
		t.Errorf("lbctl explain:\n%s", out)
	}
}

// setDefaults points the default pin directory and API elsewhere for one
// test.
func setDefaults(t *testing.T, pinDir, api string) {
	oldPinDir, oldAPI := defaultPinDir, defaultAPI
	defaultPinDir, defaultAPI = pinDir, api
	t.Cleanup(func() { defaultPinDir, defaultAPI = oldPinDir, oldAPI })
}

// lbctl maps and explain read pinned kernel maps, by default when they
// are there, and print what they print for the same entries in memory.
func TestMapsAndExplainReadPinnedMaps(t *testing.T) {
	p := demoPipeline(t, "maglev")
	cfg := bpftest.Config(t)
	cfg.LBMaglevTableSize = 251 // as demoPipeline's
	kernel := bpftest.KernelMaps(t, cfg)
	d, err := bpf.TakeDump(p.maps)
	if err != nil {
		t.Fatal(err)
	}
	tables := map[uint32][]uint32{}
	p.maps.Maglev.Iterate(func(id uint32, table []uint32) bool { tables[id] = table; return true })
	if err := bpf.LoadDump(kernel, d, tables); err != nil {
		t.Fatal(err)
	}

	// The API is not there: a default read that used it would fail.
	setDefaults(t, cfg.LBPinDir, "http://127.0.0.1:1")
	want := localDump(t, p.maps, "text")
	if got := lbctl(t, "maps", "--lb-pin-dir", cfg.LBPinDir); got != want || !strings.Contains(got, "service 10.96.0.10:80/TCP slot=1 backend=") {
		t.Fatalf("lbctl maps --lb-pin-dir:\n%s\nwant:\n%s", got, want)
	}
	if got := lbctl(t, "maps"); got != want {
		t.Fatalf("lbctl maps (pinned by default):\n%s\nwant:\n%s", got, want)
	}
	for _, src := range []string{"", "192.0.2.77:40000"} {
		args := []string{"explain", "10.96.0.10:80/TCP"}
		if src != "" {
			args = append(args, "--src", src)
		}
		if got, want := lbctl(t, args...), explainText(t, p.maps, "10.96.0.10:80/TCP", src); got != want {
			t.Errorf("lbctl %v:\n%s\nin memory:\n%s", args, got, want)
		}
	}
}
