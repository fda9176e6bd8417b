// Package zonetest runs a test with the process's table of zone names
// (lb.ZoneOf) full, in a process of its own: the table is the process's,
// and a full one would change every later test of the package.
package zonetest

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/lbstate/lbstate/lb"
)

const env = "LBSTATE_FILL_ZONE_TABLE"

// Full reports whether this process is the one to run t's body in: if
// not, it runs t alone in a child process, which fills the table first,
// and fails t if the child fails.
func Full(t *testing.T) bool {
	t.Helper()
	if os.Getenv(env) != "1" {
		cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
		cmd.Env = append(os.Environ(), env+"=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return false
	}
	for i := range 1 << 16 {
		lb.ZoneOf(fmt.Sprintf("source-zone-%d", i))
	}
	return true
}
