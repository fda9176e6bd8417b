package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lbstate/lbstate/bpf/bpftest"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// eventually runs lbctl until its output contains want.
func eventually(t *testing.T, args []string, want string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var out string
	for time.Now().Before(deadline) {
		var stdout, stderr bytes.Buffer
		if run(args, &stdout, &stderr) == 0 {
			out = stdout.String()
			if strings.Contains(out, want) {
				return out
			}
		} else {
			out = stderr.String()
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("lbctl %v never printed %q; last:\n%s", args, want, out)
	return ""
}

// The example agent on a manifests directory and kernel maps, looked at
// with lbctl; an edit of a manifest reaches the tables and the maps, and
// the agent leaves its maps pinned when it stops.
func TestAgentEndToEnd(t *testing.T) {
	bpftest.Require(t)
	if testing.Short() {
		t.Skip("builds the agent")
	}
	tmp := t.TempDir()
	agentBin := filepath.Join(tmp, "agent")
	if out, err := exec.Command("go", "build", "-o", agentBin, "../../examples/agent").CombinedOutput(); err != nil {
		t.Fatalf("building the agent: %v\n%s", err, out)
	}
	manifests := filepath.Join(tmp, "manifests")
	os.Mkdir(manifests, 0o755)
	for _, f := range []string{"node.yaml", "web.yaml", "ingress.yaml", "dns.yaml"} {
		data, err := os.ReadFile(filepath.Join("../../examples/demo", f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(manifests, f), data, 0o644)
	}
	pinDir := filepath.Join(bpftest.PinDir(t), "maps")
	api := freeAddr(t)
	var logs bytes.Buffer
	agent := exec.Command(agentBin, "--manifests", manifests, "--k8s-node-name", "node-a",
		"--lb-pin-dir", pinDir, "--lb-maglev-table-size", "251",
		"--api-addr", api, "--metrics-addr", freeAddr(t))
	agent.Stdout, agent.Stderr = &logs, &logs
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		agent.Process.Kill()
		if t.Failed() {
			t.Logf("agent log:\n%s", logs.String())
		}
	}()
	apiURL := "http://" + api

	eventually(t, []string{"frontends", "--api", apiURL}, "10.0.3.1:8080/TCP (weight=10)")
	before := eventually(t, []string{"maps", "--lb-pin-dir", pinDir}, "service 10.96.0.10:80/TCP master")

	// Shift the canary to 50: one annotation edit.
	web := filepath.Join(manifests, "web.yaml")
	data, _ := os.ReadFile(web)
	edited := strings.Replace(string(data), `annotations: {lbstate.io/weight: "10"}`, `annotations: {lbstate.io/weight: "50"}`, 1)
	if edited == string(data) {
		t.Fatal("the demo's canary annotation moved; update this test")
	}
	os.WriteFile(web, []byte(edited), 0o644)
	eventually(t, []string{"frontends", "--api", apiURL}, "10.0.3.1:8080/TCP (weight=50)")
	after := before
	for deadline := time.Now().Add(10 * time.Second); after == before && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		after = eventually(t, []string{"maps", "--lb-pin-dir", pinDir}, "service 10.96.0.10:80/TCP master")
	}
	if after == before {
		t.Fatal("the maps did not change after the canary's weight did")
	}
	if !strings.Contains(logs.String(), "Using kernel BPF maps") {
		t.Errorf("the agent did not say it uses kernel maps:\n%s", logs.String())
	}

	// A clean stop leaves the maps pinned.
	agent.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- agent.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("agent exit: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the agent did not stop on SIGTERM")
	}
	if _, err := os.Stat(filepath.Join(pinDir, "lb_services")); err != nil {
		t.Fatalf("maps not left pinned: %v", err)
	}
	if out := eventually(t, []string{"maps", "--lb-pin-dir", pinDir}, "service 10.96.0.10:80/TCP master"); out != after {
		t.Errorf("the pinned maps changed when the agent stopped")
	}
}
