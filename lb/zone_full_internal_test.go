package lb

import (
	"fmt"
	"sync"
	"testing"
)

// Names from sources stop short of the table's bound by the room kept
// for configured zones (RegisterZone): however many names sources bring
// first, a zone the configuration gives an ID still gets a handle, and
// every name refused is counted.
func TestZoneTableKeepsRoomForConfiguredZones(t *testing.T) {
	tab := newZoneTable(6, 2) // "", three from sources, two configured
	for i := range 5 {
		tab.of(fmt.Sprintf("source-%d", i))
	}
	if got := tab.refused.Load(); got != 2 {
		t.Fatalf("%d names refused, want 2 (sources get 3 of 5 handles)", got)
	}
	a, err := tab.register("zone-a")
	if err != nil || a == 0 || tab.name(a) != "zone-a" {
		t.Fatalf("configured zone-a: %d %v", a, err)
	}
	if again, err := tab.register("zone-a"); again != a || err != nil {
		t.Fatalf("zone-a again: %d %v, want %d", again, err, a)
	}
	if s, err := tab.register("source-0"); err != nil || s != tab.of("source-0") {
		t.Fatalf("a configured zone a source named first: %d %v", s, err)
	}
	if b, err := tab.register("zone-b"); err != nil || b == 0 {
		t.Fatalf("configured zone-b: %d %v", b, err)
	}
	if c, err := tab.register("zone-c"); err == nil || c != 0 {
		t.Fatalf("a configured zone past the bound: %d, err %v", c, err)
	}
	if tab.of("zone-b") == 0 {
		t.Fatalf("a source naming a configured zone gets no handle")
	}
}

// Readers (String, from any goroutine printing a frontend) and writers
// (sources' selection naming new zones) share the table safely, and each
// name keeps one handle. Run with -race.
func TestZoneTableIsSafeForConcurrentUse(t *testing.T) {
	tab := newZoneTable(1<<16, 255)
	var wg sync.WaitGroup
	handles := make([][]Zone, 4)
	for g := range handles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				z := tab.of(fmt.Sprintf("zone-%d", i))
				if name := tab.name(z); name != fmt.Sprintf("zone-%d", i) {
					t.Errorf("zone-%d: handle %d names %q", i, z, name)
					return
				}
				handles[g] = append(handles[g], z)
			}
		}()
	}
	wg.Wait()
	for g := 1; g < len(handles); g++ {
		for i := range handles[g] {
			if handles[g][i] != handles[0][i] {
				t.Fatalf("zone-%d: handles %d and %d", i, handles[0][i], handles[g][i])
			}
		}
	}
}
