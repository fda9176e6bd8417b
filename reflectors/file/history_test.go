package file

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// "Why did the primary's backends stop taking new flows of the apex?"
// The history names the HTTPRoute whose weights shifted to the canary.
func TestHistoryNamesTheRouteThatShiftedTheApexsBackends(t *testing.T) {
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
	write(t, filepath.Join(dir, "route.yaml"), strings.NewReplacer("weight: 100", "weight: 90", "weight: 0", "weight: 10").Replace(string(route)))
	_, w, db, _, _ := startSource(t, dir, slog.New(slog.DiscardHandler))
	apexBackends(t, db, w, "10.0.11.1:8080/TCP (weight=3), 10.0.11.2:8080/TCP (weight=3), 10.0.11.3:8080/TCP (weight=3), "+
		"10.0.12.1:8080/TCP (weight=1)")

	write(t, filepath.Join(dir, "route.yaml"), strings.NewReplacer("weight: 100", "weight: 0", "weight: 0", "weight: 100").Replace(string(route)))
	apex := lb.MustParseL3n4Addr("10.96.10.1:80/TCP")
	primary := "backend 10.0.11.1:8080/TCP weight 3 -> 0"
	deadline := time.Now().Add(10 * time.Second)
	for {
		recs, watch := w.History().Records(tables.HistoryQuery{Frontend: apex})
		if n := len(recs); n > 0 && slices.Contains(recs[n-1].Changed, primary) {
			if r := recs[n-1]; r.Cause != "file HTTPRoute default/web" {
				t.Fatalf("the shift's cause: %+v", r)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no record of the shift by the deadline: %+v", recs)
		}
		select {
		case <-watch:
		case <-time.After(50 * time.Millisecond):
		}
	}
}
