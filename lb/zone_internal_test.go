package lb

import "testing"

// Past its bound, a zone table gives a new name the zero Zone (no zone)
// rather than failing or growing: names come from sources, and a broken
// one must not grow the process without end. The names it holds keep
// their handles.
func TestZoneTableFullGivesNewNamesNoZone(t *testing.T) {
	tab := newZoneTable(3, 0) // "" and two names
	a, b := tab.of("a"), tab.of("b")
	if a == 0 || b == 0 || a == b {
		t.Fatalf("a %d, b %d", a, b)
	}
	if c := tab.of("c"); c != 0 {
		t.Fatalf("a third name in a full table got %d, want 0", c)
	}
	if tab.of("a") != a || tab.name(a) != "a" || tab.name(b) != "b" || tab.name(3) != "" || len(tab.names) != 3 {
		t.Fatalf("after the table filled: a %d %q, b %q, 3 %q, %d names", tab.of("a"), tab.name(a), tab.name(b), tab.name(3), len(tab.names))
	}
}
