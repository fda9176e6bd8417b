package main

import (
	"bytes"
	"strings"
	"testing"
)

// Flags after a positional argument are parsed, and a stray argument is
// an error. Once, flags after a stray argument were silently ignored: the
// output format asked for was not used and the command succeeded.
func TestRemoteRejectsAStrayArgumentBeforeFlags(t *testing.T) {
	api := agentAPI(t)
	var stdout, stderr bytes.Buffer
	code := run([]string{"frontends", "--api", api, "extra", "-o", "json"}, &stdout, &stderr)
	if code == 0 && !strings.HasPrefix(strings.TrimSpace(stdout.String()), "[") {
		t.Fatalf("exit 0 and not JSON output:\n%s", stdout.String())
	}
	if code == 0 || !strings.Contains(stderr.String(), `unexpected argument "extra"`) {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	// A positional argument may come before the flags.
	if out := lbctl(t, "explain", "10.96.0.10:80/TCP", "--api", api); !strings.HasPrefix(out, "frontend 10.96.0.10:80/TCP:") {
		t.Errorf("explain FRONTEND --api:\n%s", out)
	}
}

// The flags that mirror the agent's have its names; lbctl's earlier names
// and the long forms of -f and -o mean the same.
func TestFlagsHaveTheAgentsNames(t *testing.T) {
	agentNames := lbctl(t, "simulate", "-f", "../../examples/demo", "--lb-algorithm", "maglev", "--lb-maglev-table-size", "251", "--k8s-node-name", "node-b", "-o", "json")
	if !strings.Contains(agentNames, `"algorithm": "maglev"`) || strings.Contains(agentNames, `"algorithm": "random"`) || !strings.Contains(agentNames, `"slots": 251`) {
		t.Fatalf("--lb-algorithm maglev --lb-maglev-table-size 251 not used:\n%s", agentNames)
	}
	// The Local-policy NodePort takes the local node's backends only.
	if nodeA := lbctl(t, "simulate", "-f", "../../examples/demo", "--lb-algorithm", "maglev", "--lb-maglev-table-size", "251", "-o", "json"); nodeA == agentNames {
		t.Fatal("--k8s-node-name node-b changed nothing")
	}
	for _, args := range [][]string{
		{"simulate", "--manifests", "../../examples/demo", "--algorithm", "maglev", "--maglev-table-size", "251", "--node-name", "node-b", "--output", "json"},
		{"simulate", "--manifests=../../examples/demo", "--algorithm=maglev", "--maglev-table-size=251", "--node-name=node-b", "--output=json"},
	} {
		if got := lbctl(t, args...); got != agentNames {
			t.Errorf("lbctl %v differs from the agent's names:\n%s", args, got)
		}
	}
}

func TestHelpListsTheFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"simulate", "--help"}, []string{"Usage: lbctl simulate -f DIR", "-f, --manifests string", "--lb-algorithm string", "--lb-maglev-table-size uint32", "(default 16381)", "--k8s-node-name string", "-o, --output string"}},
		{[]string{"explain", "-h"}, []string{"Usage: lbctl explain FRONTEND", "--src string", "--lb-pin-dir string", "--api string", "Maglev table size, a prime (with -f)"}},
		{[]string{"maps", "--help"}, []string{"--lb-pin-dir string", "--api string", "(default \"http://127.0.0.1:9811\")", "-o, --output string"}},
		{[]string{"frontends", "--help"}, []string{"--api string", "-o, --output string", "-w, --watch"}},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != 0 {
			t.Errorf("lbctl %v: exit %d", tc.args, code)
		}
		for _, want := range tc.want {
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("lbctl %v: no %q in:\n%s", tc.args, want, stderr.String())
			}
		}
	}
}
