package main

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeManyPorts writes a Service with n ports into a new manifests
// directory and returns the directory.
func writeManyPorts(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Service\nmetadata: {name: big}\nspec:\n  clusterIP: 10.96.0.1\n  ports:\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  - {name: p%d, port: %d}\n", i, i)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "big.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// waitFrontends waits until the agent's metrics count n frontends.
func waitFrontends(t *testing.T, metricsAddr string, n int) {
	t.Helper()
	want := fmt.Sprintf(`lbstate_table_objects{table="frontends"} %d`, n)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if body, _ := get(t, "http://"+metricsAddr+"/metrics"); strings.Contains(body, want) {
			return
		}
	}
	t.Fatalf("the agent never had %d frontends", n)
}

// A frontend's row names its service and does not embed the service's
// other frontends: the frontends dump of a Service with 10,000 ports is
// proportional to its 10,000 rows, not to their square.
//
// It once embedded every frontend's whole service declaration, which made
// this dump 7 GB (53 s, the agent at 4.6 GB) for one Service any user
// with write access to a manifests directory could declare.
func TestFrontendsDumpIsLinearInPorts(t *testing.T) {
	const ports, maxPerFrontend = 10000, 1024
	api, metricsAddr := startAgentOn(t, writeManyPorts(t, ports), slog.New(slog.DiscardHandler))
	waitFrontends(t, metricsAddr, ports)

	resp, err := http.Get("http://" + api + "/statedb/dump/frontends")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// Read no more than the bound allows: the quadratic dump would take
	// minutes and gigabytes.
	limit := int64(ports * maxPerFrontend)
	n, err := io.Copy(io.Discard, io.LimitReader(resp.Body, limit+1))
	if err != nil {
		t.Fatal(err)
	}
	if n > limit {
		t.Fatalf("the frontends dump of %d ports is over %d bytes, more than %d bytes per frontend", ports, limit, maxPerFrontend)
	}
	t.Logf("frontends dump: %d bytes for %d frontends, %d bytes per frontend", n, ports, n/ports)
}
