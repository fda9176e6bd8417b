package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	lbapi "github.com/lbstate/lbstate/api"
)

// freeAddr returns a loopback address with a port nobody listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startAgent starts the agent on examples/demo with in-memory maps and
// returns its API and metrics addresses.
func startAgent(t *testing.T) (api, metricsAddr string) {
	t.Helper()
	return startAgentOn(t, "../demo", slog.New(slog.DiscardHandler))
}

// startAgentOn starts the agent on a manifests directory, logging to log.
// A port freeAddr found free may be taken before the agent binds it (by
// the local end of another test's connection): it then tries others.
func startAgentOn(t *testing.T, dir string, log *slog.Logger, extra ...string) (api, metricsAddr string) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		api, metricsAddr = freeAddr(t), freeAddr(t)
		h, _, err := newAgent(append([]string{"--manifests", dir, "--k8s-node-name", "node-a",
			"--lb-maps", "memory", "--api-addr", api, "--metrics-addr", metricsAddr}, extra...))
		if err != nil {
			t.Fatal(err)
		}
		err = h.Start(log, context.Background())
		if errors.Is(err, syscall.EADDRINUSE) && attempt < 5 {
			h.Stop(log, context.Background())
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Stop(log, context.Background()) })
		return api, metricsAddr
	}
}

func get(t *testing.T, url string) (string, http.Header) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", url, resp.Status, err)
	}
	return string(body), resp.Header
}

// The agent's /metrics is Prometheus's exposition of the reconciler's,
// the sources' and the tables' metrics, once the demo is applied.
func TestMetricsServed(t *testing.T) {
	_, metricsAddr := startAgent(t)
	want := []string{
		`lbstate_source_synced{source="file"} 1`,
		`lbstate_source_objects{kind="services",source="file"} 4`,
		`lbstate_source_errors_total{source="file"} 0`,
		`lbstate_reconciler_duration_seconds_count{operation="update"}`,
		`lbstate_reconciler_failing_frontends 0`,
		`lbstate_table_objects{table="frontends"}`,
		`lbstate_write_txn_duration_seconds_bucket{handle=`,
		`go_goroutines `,
	}
	var body string
	var header http.Header
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		body, header = get(t, "http://"+metricsAddr+"/metrics")
		if missing(body, want) == "" {
			break
		}
	}
	if m := missing(body, want); m != "" {
		t.Fatalf("/metrics lacks %q:\n%s", m, body)
	}
	if ct := header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type %q, want Prometheus's text format", ct)
	}
}

// getEventually GETs url until its body contains want, or fails.
func getEventually(t *testing.T, url, want string) {
	t.Helper()
	var body string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if body, _ = get(t, url); strings.Contains(body, want) {
			return
		}
	}
	t.Fatalf("GET %s lacks %q:\n%.500s", url, want, body)
}

func missing(body string, want []string) string {
	for _, w := range want {
		if !strings.Contains(body, w) {
			return w
		}
	}
	return ""
}

// The API serves StateDB under /statedb/ and the maps' dump, so lbctl
// works against an agent whose maps it cannot open.
func TestAPIServesTablesAndMaps(t *testing.T) {
	api, _ := startAgent(t)
	getEventually(t, "http://"+api+lbapi.MapsPath, "10.96.0.10")
	if body, _ := get(t, "http://"+api+"/statedb/dump"); !strings.Contains(body, "frontends") {
		t.Fatalf("/statedb/dump lacks the frontends table:\n%.500s", body)
	}
}

// An agent given a manifests directory that does not exist fails at
// start, naming it, instead of running without a source.
func TestMissingManifestsDirectoryFails(t *testing.T) {
	err := run([]string{"--manifests", "/nonexistent-manifests", "--k8s-node-name", "node-a",
		"--lb-maps", "memory", "--api-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent-manifests") {
		t.Fatalf("run: %v, want an error naming the directory", err)
	}
}

// Without a source the agent says how to give one.
func TestNoSourceSaysWhatToGive(t *testing.T) {
	_, _, err := newAgent([]string{"--lb-maps", "memory"})
	if err == nil || !strings.Contains(err.Error(), "--manifests") || !strings.Contains(err.Error(), "--kubeconfig") {
		t.Fatalf("newAgent: %v, want an error naming --manifests and --kubeconfig", err)
	}
}

// At INFO the log has the agent's own lines, not hive's line per hook;
// --debug shows those too.
func TestHiveHookLinesOnlyWithDebug(t *testing.T) {
	for _, debug := range []bool{false, true} {
		var buf bytes.Buffer
		log := newLogger(&buf, debug)
		log.Info("Start hook executed", "function", "x")
		log.Info("Source synced", "source", "file")
		out := buf.String()
		if !strings.Contains(out, `msg="Source synced"`) {
			t.Errorf("debug=%v: the agent's line is missing:\n%s", debug, out)
		}
		if got := strings.Contains(out, "level=DEBUG msg=\"Start hook executed\""); got != debug {
			t.Errorf("debug=%v: hook line shown at DEBUG = %v:\n%s", debug, got, out)
		}
		if strings.Contains(out, "level=INFO msg=\"Start hook executed\"") {
			t.Errorf("debug=%v: hook line at INFO:\n%s", debug, out)
		}
	}
}

// A kubeconfig gives the Kubernetes source both its clientset and the
// metadata client it watches every Node's labels with; none gives neither.
func TestKubeconfigGivesBothClients(t *testing.T) {
	if c, err := newKubeClients(""); err != nil || c.Client != nil || c.Metadata != nil {
		t.Fatalf("no kubeconfig: %+v, %v; want no clients", c, err)
	}
	path := t.TempDir() + "/kubeconfig"
	kubeconfig := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:6443'}}]\n" +
		"contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: {token: t}}]\n"
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := newKubeClients(path); err != nil || c.Client == nil || c.Metadata == nil {
		t.Fatalf("kubeconfig: %+v, %v; want both clients", c, err)
	}
}
