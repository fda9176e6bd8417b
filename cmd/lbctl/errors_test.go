package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Every error says what was wrong and what to do next: which flag or
// value to give, which command lists what exists, how to start an agent.
func TestErrorsSayWhatToDoNext(t *testing.T) {
	// An agent that serves its tables but not its maps.
	mux := http.NewServeMux()
	mux.Handle("/statedb/", http.NotFoundHandler())
	oldAgent := httptest.NewServer(mux)
	defer oldAgent.Close()
	api := agentAPI(t)
	setDefaults(t, t.TempDir(), "http://127.0.0.1:1")

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{nil, 2, "Usage: lbctl COMMAND"},
		{[]string{"simulate", "--help"}, 0, "Usage: lbctl simulate -f DIR"},

		// Flags.
		{[]string{"maps", "--frob"}, 1, "unknown flag: --frob (lbctl maps --help lists the flags)"},
		{[]string{"simulate", "-f", "../../examples/demo", "-algorithm", "maglev"}, 1, "long flags take two dashes: --algorithm"},
		{[]string{"services", "--api", api, "extra"}, 1, `unexpected argument "extra" (lbctl services takes flags only; see --help)`},
		{[]string{"backends", "--api", "http://127.0.0.1:1", "-o", "xml"}, 1, `-o "xml": want table, json or yaml`},
		{[]string{"maps", "-o", "xml"}, 1, `-o "xml": want table, json or yaml`},
		{[]string{"simulate", "-f", "../../examples/demo", "-o", "xml"}, 1, `-o "xml": want table, json or yaml`},

		// The agent.
		{[]string{"frontends", "--api", "http://127.0.0.1:1/statedb"}, 1, "no agent at http://127.0.0.1:1: start one (go run ./examples/agent --manifests examples/demo) or give its --api"},
		{[]string{"services", "--timeout", "0s"}, 1, "--timeout 0s: give a duration above zero, such as 10s"},
		{[]string{"services", "--api", "not a url"}, 1, `--api "not a url": want the agent's URL, such as http://127.0.0.1:1`},
		{[]string{"maps"}, 1, "no pinned maps in " + defaultPinDir + " and no agent at http://127.0.0.1:1: start the agent (go run ./examples/agent --manifests examples/demo) or give --lb-pin-dir / --api"},
		{[]string{"maps", "--api", "127.0.0.1:1"}, 1, "no agent at http://127.0.0.1:1: start one"},
		{[]string{"maps", "--api", oldAgent.URL}, 1, "does not serve its maps at /maps: read its pinned maps with --lb-pin-dir"},
		{[]string{"maps", "--lb-pin-dir", "/nonexistent"}, 1, "no pinned map lb_services in /nonexistent (is an agent running with --lb-pin-dir /nonexistent?)"},
		{[]string{"maps", "--lb-pin-dir", "/nonexistent", "--api", api}, 1, "give --lb-pin-dir or --api, not both"},

		// explain.
		{[]string{"explain", "--api", api}, 1, "give one FRONTEND, e.g. 10.96.0.10:80/TCP (lbctl frontends lists them)"},
		{[]string{"explain", "shop/web", "--api", api}, 1, "give a FRONTEND such as 10.96.0.10:80/TCP"},
		{[]string{"explain", "10.96.0.10:80/TCP", "--src", "192.0.2.1", "--api", api}, 1, `--src "192.0.2.1": want the client's ADDR:PORT`},
		{[]string{"explain", "10.96.0.99:80/TCP", "--api", api}, 1, "no service entry for 10.96.0.99:80/TCP: the datapath does not balance it (lbctl maps lists the frontends the maps have)"},
		{[]string{"explain", "-f", "../../examples/demo", "10.96.0.99:80/TCP"}, 1, "(lbctl simulate -f ../../examples/demo lists them)"},
		{[]string{"explain", "10.96.0.10:80/TCP", "--zone", "zone-b"}, 1, "--zone needs -f DIR: an agent's maps already follow its own settings"},
		{[]string{"explain", "10.96.0.10:80/TCP", "-f", "../../examples/demo", "--api", api}, 1, "-f explains offline: drop --lb-pin-dir and --api, or drop -f"},

		// simulate and explain -f.
		{[]string{"simulate"}, 1, "-f DIR is required: a directory of Kubernetes manifests, such as examples/demo"},
		{[]string{"simulate", "-f", "/nonexistent"}, 1, "-f /nonexistent: not a directory (give a directory of Kubernetes manifests, such as examples/demo)"},
		{[]string{"explain", "-f", "/nonexistent", "10.96.0.10:80/TCP"}, 1, "-f /nonexistent: not a directory"},
		{[]string{"simulate", "-f", "../../examples/demo", "--lb-algorithm", "fastest"}, 1, `--lb-algorithm "fastest": want random or maglev`},
		{[]string{"simulate", "-f", "../../examples/demo", "--lb-maglev-table-size", "100"}, 1, "--lb-maglev-table-size: maglev table size 100: must be a prime"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("lbctl %v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
}
