package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lbstate/lbstate/bpf/bpftest"
)

// secondAgentEnv makes this test binary a second agent, run with the
// arguments it holds (JSON): see TestMain.
const secondAgentEnv = "LBSTATE_SOAK_SECOND_AGENT"

// TestMain runs the tests in a mount namespace of their own, so that the
// soak's bpffs dies with them (bpftest.Main); the soak's second agent,
// started in that namespace, runs the agent instead.
func TestMain(m *testing.M) {
	if args := os.Getenv(secondAgentEnv); args != "" {
		var a []string
		if err := json.Unmarshal([]byte(args), &a); err != nil {
			fmt.Fprintln(os.Stderr, "agent:", err)
			os.Exit(2)
		}
		if err := run(a); err != nil {
			fmt.Fprintln(os.Stderr, "agent:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	bpftest.Main(m)
}

// secondAgentRefused starts a second agent process, with manifests of its
// own, on the soak agent's pin directory (with --lb-maps mode): it must
// exit at once with an error naming the directory and this process's
// PID, the holder's, and leave the first agent's maps alone.
func secondAgentRefused(t *testing.T, w *soakWorld, pinDir, mode string) {
	t.Helper()
	own := filepath.Join(w.dir, "second-agent")
	if _, err := os.Stat(own); err != nil {
		must(t, os.MkdirAll(own, 0o755))
		var b strings.Builder
		serviceYAML(&b, "intruder", "10.96.9.9", nil, []string{"10.9.9.9:8080"})
		write(t, filepath.Join(own, "intruder.yaml"), b.String())
	}
	args, _ := json.Marshal([]string{"--manifests", own, "--k8s-node-name", "node-b",
		"--lb-maps", mode, "--lb-pin-dir", pinDir, "--api-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0"})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), secondAgentEnv+"="+string(args))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	must(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err == nil {
			t.Fatalf("a second agent (--lb-maps %s) on the pin directory exited without an error: %s", mode, stderr.String())
		}
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-exited
		t.Fatalf("a second agent (--lb-maps %s) on the pin directory still ran after a minute: %s", mode, stderr.String())
	}
	for _, want := range []string{pinDir, "PID " + strconv.Itoa(os.Getpid())} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the second agent (--lb-maps %s) was refused without naming %q: %s", mode, want, stderr.String())
		}
	}
}

// exportConfigsRefused starts agents whose --clustermesh-export is a
// FIFO, a link to /dev/zero, or a config naming the FIFO as its CA: each
// fails to start, at once, with an error naming the file.
func exportConfigsRefused(t *testing.T, w *soakWorld) {
	t.Helper()
	exportDir, tls := filepath.Join(w.dir, "export"), filepath.Join(w.dir, "tls")
	badCA := filepath.Join(exportDir, "badca.yaml")
	if _, err := os.Stat(badCA); err != nil {
		write(t, badCA, fmt.Sprintf("endpoints:\n- %s\ntrusted-ca-file: %s\n", w.etcd.Endpoint(), filepath.Join(tls, "ca.crt")))
	}
	empty := filepath.Join(w.dir, "empty")
	must(t, os.MkdirAll(empty, 0o755))
	cases := map[string]string{
		filepath.Join(exportDir, "fifo.yaml"): filepath.Join(exportDir, "fifo.yaml"),
		filepath.Join(exportDir, "zero.yaml"): filepath.Join(exportDir, "zero.yaml"),
		badCA:                                 filepath.Join(tls, "ca.crt"),
	}
	// One at a time: newAgent sets klog's logger, a process global.
	for export, named := range cases {
		func() {
			h, _, err := newAgent([]string{"--manifests", empty, "--k8s-node-name", "node-a", "--lb-maps", "memory",
				"--api-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
				"--cluster-name", "other", "--cluster-id", "3", "--clustermesh-export", export})
			if err != nil {
				t.Errorf("--clustermesh-export %s: %v", export, err)
				return
			}
			log := slog.New(slog.DiscardHandler)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err = h.Start(log, ctx)
			h.Stop(log, context.Background())
			if err == nil || !strings.Contains(err.Error(), named) {
				t.Errorf("an agent with --clustermesh-export %s started: %v; want an error naming %s", export, err, named)
			}
		}()
	}
}
