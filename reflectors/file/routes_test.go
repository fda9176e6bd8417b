package file

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

const splitYAML = `apiVersion: split.smi-spec.io/$VERSION
kind: TrafficSplit
metadata: {name: web}
spec:
  service: web
  backends:
  - {service: web-primary, weight: $PRIMARY}
  - {service: web-canary, weight: $CANARY}
`

func splitDoc(version, primary, canary string) string {
	return strings.NewReplacer("$VERSION", version, "$PRIMARY", primary, "$CANARY", canary).Replace(splitYAML)
}

// apexBackends waits until the apex frontend of the canary example
// (10.96.10.1:80) has backends want, or fails.
func apexBackends(t *testing.T, db *statedb.DB, w *tables.Writer, want string) {
	t.Helper()
	addr := lb.MustParseL3n4Addr("10.96.10.1:80/TCP")
	got := ""
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		fe, _, found := w.Frontends().Get(db.ReadTxn(), tables.FrontendByAddress.Query(addr))
		if !found {
			continue
		}
		parts := make([]string, len(fe.Backends))
		for i, b := range fe.Backends {
			parts[i] = b.String()
		}
		if got = strings.Join(parts, ", "); got == want {
			return
		}
	}
	t.Fatalf("apex backends:\n%s\nwant\n%s", got, want)
}

// Traffic splits from a manifests directory: the canary example's
// HTTPRoute, then a TrafficSplit in its place (every version); an
// invalid update is rejected and the last valid version stays; removing
// the file gives the apex its own backend back.
func TestRoutesFromManifestsSplitAndRestore(t *testing.T) {
	dir := t.TempDir()
	services, err := os.ReadFile("../../examples/canary/manifests/services.yaml")
	if err != nil {
		t.Fatal(err)
	}
	route, err := os.ReadFile("../../examples/canary/manifests/route.yaml")
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "services.yaml"), string(services))
	s, w, db, _, _ := startSource(t, dir, slog.New(slog.DiscardHandler))
	own := "10.0.10.1:8080/TCP"
	apexBackends(t, db, w, own)

	write(t, filepath.Join(dir, "route.yaml"), strings.NewReplacer("weight: 100", "weight: 90", "weight: 0", "weight: 10").Replace(string(route)))
	apexBackends(t, db, w, "10.0.11.1:8080/TCP (weight=3), 10.0.11.2:8080/TCP (weight=3), 10.0.11.3:8080/TCP (weight=3), "+
		"10.0.12.1:8080/TCP (weight=1)")

	os.Remove(filepath.Join(dir, "route.yaml"))
	apexBackends(t, db, w, own)
	for _, v := range []string{"v1alpha2", "v1alpha3", "v1alpha4"} {
		write(t, filepath.Join(dir, "split.yaml"), splitDoc(v, "1", "1"))
		apexBackends(t, db, w, "10.0.11.1:8080/TCP (weight=1), 10.0.11.2:8080/TCP (weight=1), 10.0.11.3:8080/TCP (weight=1), "+
			"10.0.12.1:8080/TCP (weight=3)")
		os.Remove(filepath.Join(dir, "split.yaml"))
		apexBackends(t, db, w, own)
	}

	write(t, filepath.Join(dir, "split.yaml"), splitDoc("v1alpha4", "0", "1"))
	canaryOnly := "10.0.12.1:8080/TCP (weight=1), 10.0.11.1:8080/TCP (weight=0), " +
		"10.0.11.2:8080/TCP (weight=0), 10.0.11.3:8080/TCP (weight=0)"
	apexBackends(t, db, w, canaryOnly)
	errs := s.Errors()
	write(t, filepath.Join(dir, "split.yaml"), splitDoc("v1alpha4", "-1", "1"))
	for deadline := time.Now().Add(5 * time.Second); s.Errors() == errs; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a negative weight was not reported")
		}
	}
	apexBackends(t, db, w, canaryOnly)
	os.Remove(filepath.Join(dir, "split.yaml"))
	apexBackends(t, db, w, own)
}
