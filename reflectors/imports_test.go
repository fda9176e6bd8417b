package reflectors_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/lbstate/lbstate/reflectors"

// notSources are the packages under reflectors/ that every source may
// import: the feeds' plumbing (kubeapi: the Feed type, the API server's
// feed, the kinds). The kit itself (reflectors) is the parent.
var notSources = map[string]bool{"kubeapi": true}

// companions may import the one source they serve, and nothing else:
// routestatus writes the status of routes.Cell's rows back to the API
// server; it is no source (it writes no table), and no source imports it.
var companions = map[string]string{"routestatus": "routes"}

// Every source is a peer: no package of one source (k8s, file,
// redirectpolicy, routes, clustermesh, health, and any new directory
// under reflectors/) imports a package of another, directly or through
// others, so that a source observes the others only through the tables.
func TestSourcesDoNotImportEachOther(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	sources := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		src := sourceOf(fields[0])
		if src == "" {
			continue
		}
		sources++
		for _, dep := range fields[1:] {
			other := sourceOf(dep)
			if other == "" || other == src || companions[src] == other {
				continue
			}
			t.Errorf("%s imports %s (of source %s), directly or through others", fields[0], dep, other)
		}
	}
	if sources < 6 {
		t.Fatalf("checked %d source packages, want at least the six sources'", sources)
	}
}

// sourceOf is the source (a directory right under reflectors/) a package
// belongs to, or "" for the kit, the feeds' plumbing and other modules'.
func sourceOf(pkg string) string {
	rest, ok := strings.CutPrefix(pkg, module+"/")
	if !ok {
		return ""
	}
	dir, _, _ := strings.Cut(rest, "/")
	if notSources[dir] {
		return ""
	}
	return dir
}
