package main

// Regression tests from a review of the sources, the agent and lbctl.
// Each test's comment describes the bug it caught (fixed since).

import (
	"strings"
	"testing"
	"time"
)

// An agent given a manifests directory that does not exist must fail,
// not run on without a source.
func TestReview2MissingManifestsDirFails(t *testing.T) {
	done := make(chan error, 1)
	go func() {
		done <- run([]string{"--manifests", "/nonexistent-review2", "--k8s-node-name", "node-a",
			"--lb-maps", "memory", "--api-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0"})
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "nonexistent-review2") {
			t.Fatalf("run: %v, want an error naming the directory", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("agent still running 10s after being given a missing --manifests directory")
	}
}
