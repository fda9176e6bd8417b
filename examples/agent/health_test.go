package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// With --health the agent checks the demo's backends: the whoami
// service's three loopback backends by HTTP, as its annotations say, and,
// with --health-networks 127.0.0.0/8, none of the made-up 10.0.0.0/8
// ones (so this test probes loopback only).
func TestHealthCheckingOnWithFlag(t *testing.T) {
	api, metricsAddr := freeAddr(t), freeAddr(t)
	h, _, err := newAgent([]string{"--manifests", "../demo", "--k8s-node-name", "node-a", "--lb-maps", "memory",
		"--api-addr", api, "--metrics-addr", metricsAddr, "--health", "--health-networks", "127.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	if err := h.Start(log, context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Stop(log, context.Background()) })
	want := []string{
		`lbstate_source_synced{source="health"} 1`,
		`lbstate_health_backends{kind="http"} 3`,
		`lbstate_health_breaker_state{backend="127.0.0.3:18080/TCP"}`,
	}
	var body string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if body, _ = get(t, "http://"+metricsAddr+"/metrics"); missing(body, want) == "" {
			break
		}
	}
	if m := missing(body, want); m != "" {
		t.Fatalf("/metrics lacks %q:\n%s", m, body)
	}
	if strings.Contains(body, `lbstate_health_breaker_state{backend="10.`) {
		t.Errorf("a backend outside --health-networks is checked:\n%s", body)
	}
}
