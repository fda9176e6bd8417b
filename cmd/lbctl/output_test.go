package main

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// listingCommands are lbctl's commands that list rows, against agents
// serving the demo, policies and routes.
func listingCommands(demo, redirects, routes string) [][]string {
	return [][]string{
		{"services", "--api", demo}, {"frontends", "--api", demo}, {"backends", "--api", demo},
		{"redirects", "--api", redirects}, {"routes", "--api", routes},
		{"maps", "--api", demo},
		{"simulate", "-f", "../../examples/demo"},
	}
}

// Every command that lists rows takes -o table, json and yaml, with the
// same flag: table is the default, and "text" (maps' name for its table
// before) means table; JSON and YAML hold the same rows. Once, maps took
// text|json only and simulate table|json.
func TestEveryListingCommandTakesTableJSONAndYAML(t *testing.T) {
	canary, err := startPipeline("../../examples/canary/manifests", "node-a", "", "random", 251, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(canary.stop)
	for _, cmd := range listingCommands(agentAPI(t), serveAgent(t, redirectsPipeline(t)), serveAgent(t, canary)) {
		with := func(format string) string { return lbctl(t, append(slices.Clone(cmd), "-o", format)...) }
		table := lbctl(t, cmd...)
		if got := with("table"); got != table {
			t.Errorf("lbctl %s -o table differs from the default:\n%s\nwant\n%s", cmd[0], got, table)
		}
		if got := with("text"); got != table {
			t.Errorf("lbctl %s -o text differs from -o table:\n%s\nwant\n%s", cmd[0], got, table)
		}
		if table == "" || json.Valid([]byte(table)) {
			t.Errorf("lbctl %s -o table: not a table:\n%s", cmd[0], table)
		}
		var fromJSON, fromYAML any
		if err := json.Unmarshal([]byte(with("json")), &fromJSON); err != nil {
			t.Errorf("lbctl %s -o json: %v", cmd[0], err)
		}
		yamlOut := with("yaml")
		if err := yaml.Unmarshal([]byte(yamlOut), &fromYAML); err != nil || json.Valid([]byte(yamlOut)) {
			t.Errorf("lbctl %s -o yaml: %v, not block YAML:\n%s", cmd[0], err, yamlOut)
		}
		if n, m := count(fromJSON), count(fromYAML); n != m || n == 0 {
			t.Errorf("lbctl %s: %d rows in JSON, %d in YAML, want the same, not 0", cmd[0], n, m)
		}
		if cmd[0] == "maps" || cmd[0] == "simulate" { // JSON's names and values, in YAML
			if a, b := canonical(t, fromJSON), canonical(t, fromYAML); a != b {
				t.Errorf("lbctl %s: -o yaml is not -o json's document:\n%s\nwant\n%s", cmd[0], b, a)
			}
		}
	}
}

// A format no command knows is an error naming the flag and the formats,
// the same on every listing command, before anything is read.
func TestEveryListingCommandRejectsAnUnknownFormat(t *testing.T) {
	none := "http://127.0.0.1:1" // nothing listens: the flag fails first
	for _, cmd := range listingCommands(none, none, none) {
		var stdout, stderr bytes.Buffer
		code := run(append(slices.Clone(cmd), "-o", "xml"), &stdout, &stderr)
		want := `-o "xml": want table, json or yaml`
		if code != 1 || !strings.Contains(stderr.String(), want) || stdout.Len() != 0 {
			t.Errorf("lbctl %s -o xml: exit %d, stdout %q, stderr %q; want exit 1 and %q", cmd[0], code, stdout.String(), stderr.String(), want)
		}
	}
}

// count is the number of rows in a decoded list, or of frontends and of
// map sections in a decoded object.
func count(v any) int {
	switch v := v.(type) {
	case []any:
		return len(v)
	case map[string]any:
		return len(v)
	}
	return 0
}

// canonical is v as sorted JSON, so that JSON's float64 and YAML's int
// compare equal.
func canonical(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
