package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lbstate/lbstate/bpf/bpftest"
)

// TestMain lets the test binary be -health's listener child too, as
// lbbench itself is.
func TestMain(m *testing.M) {
	if spec := os.Getenv(listenersEnv); spec != "" {
		if err := serveListeners(spec); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	bpftest.Main(m)
}

// A small -health run probes every backend it started, and every
// backend it stops trips into the maps; the summary has every figure the
// issue names. (How fast is for the benchmark itself to say.)
func TestHealthBenchSmoke(t *testing.T) {
	var out bytes.Buffer
	o := options{maps: "memory", json: true, healthMode: true,
		health: healthOptions{backends: 40, interval: 100 * time.Millisecond, window: 300 * time.Millisecond, fail: 3}}
	if err := runHealth(o, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var res healthResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("last line is not JSON: %v\n%s", err, out.String())
	}
	if res.Backends != 40 || res.ProbesStarted == 0 || res.CPUCoreFraction <= 0 || res.TripToMapsMaxMs <= 0 || res.TripBoundMs != 350 {
		t.Errorf("summary %+v", res)
	}
}

func TestHealthBenchOptionErrors(t *testing.T) {
	o := options{maps: "memory", healthMode: true, health: healthOptions{backends: 40, interval: time.Second, window: time.Second, fail: 5}}
	if err := runHealth(o, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "-health-fail at most one per service") {
		t.Errorf("5 failures among 4 services: %v", err)
	}
}
