package tables

import (
	"strings"
	"testing"

	"github.com/lbstate/lbstate/lb"
)

// The sources table lists every registered source with its priority,
// built-in or not, including one registered after the Writer was
// created, once a source registers its initializer.
func TestSourcesTableListsRegisteredSources(t *testing.T) {
	w := newTestWriter(t)
	late := lb.MustRegisterSource("tables-late", 45)
	if _, err := w.RegisterInitializer(late.String()); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint16{}
	for row := range w.t.sources.All(w.db.ReadTxn()) {
		got[row.Name] = row.Priority
	}
	for _, src := range []lb.Source{lb.SourceAPI, lb.SourceK8s, lb.SourceRedirect, late} {
		if p, ok := got[src.String()]; !ok || p != src.Priority() {
			t.Errorf("sources table: %s has priority %d (listed: %v), want %d", src, p, ok, src.Priority())
		}
	}
}

// A reader registers what an agent's sources table lists: the same
// registrations again are fine, a name with another priority is an
// error naming both.
func TestRegisterSourcesFromAnotherProcess(t *testing.T) {
	if err := RegisterSources([]*RegisteredSource{{Name: "k8s", Priority: 300}, {Name: "tables-remote", Priority: 46}}); err != nil {
		t.Fatal(err)
	}
	if src, err := lb.ParseSource("tables-remote"); err != nil || src.Priority() != 46 {
		t.Errorf("tables-remote: %v, %v", src, err)
	}
	err := RegisterSources([]*RegisteredSource{{Name: "k8s", Priority: 301}})
	if err == nil || !strings.Contains(err.Error(), `"k8s"`) || !strings.Contains(err.Error(), "301") || !strings.Contains(err.Error(), "300") {
		t.Errorf("conflicting priority: %v", err)
	}
}
