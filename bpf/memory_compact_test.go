package bpf

import "testing"

// An in-memory map gives back the room of entries deleted, as a kernel
// hash map does: below a quarter of its peak its Go map is made anew,
// with every entry left. (A delete-all of 200,000 services kept 24 MB.)
func TestMemoryMapGivesBackRoomOfDeletedEntries(t *testing.T) {
	m := &memMap[uint32, uint64]{name: "test", capacity: 1 << 20, entries: map[uint32]uint64{}}
	keys := make([]uint32, 8000)
	for i := range keys {
		keys[i] = uint32(i)
		if err := m.Update(uint32(i), uint64(i)*3); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.BatchDelete(keys[:7000]); err != nil {
		t.Fatal(err)
	}
	if m.peak != 1000 {
		t.Fatalf("peak %d after deleting 7 in 8, want 1000: not made anew", m.peak)
	}
	for _, k := range keys[7000:] {
		if v, ok, _ := m.Lookup(k); !ok || v != uint64(k)*3 {
			t.Fatalf("entry %d: %d %v after compacting", k, v, ok)
		}
	}
	for _, k := range keys[7000:] {
		m.Delete(k)
	}
	if len(m.entries) != 0 {
		t.Fatalf("%d entries left", len(m.entries))
	}
}
