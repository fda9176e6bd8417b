package tables

import (
	"testing"
	"unsafe"
)

// The ring hands back entries in the order pushed, across chunk
// boundaries, as it fills, drains and fills again, and keeps nothing of
// what it popped.
func TestHistoryRingKeepsOrderAcrossChunks(t *testing.T) {
	var r entryRing
	next, oldest := uint64(1), uint64(1)
	push := func(k int) {
		for range k {
			r.push(&historyEntry{seq: next, size: int32(next)})
			next++
		}
	}
	pop := func(k int) {
		for range k {
			if got := r.pop(); got != int32(oldest) {
				t.Fatalf("popped size %d, want %d", got, oldest)
			}
			oldest++
		}
	}
	check := func() {
		t.Helper()
		if r.len() != int(next-oldest) {
			t.Fatalf("len %d, want %d", r.len(), next-oldest)
		}
		for i := range r.len() {
			if s := r.at(i).seq; s != oldest+uint64(i) {
				t.Fatalf("at(%d) = %d, want %d", i, s, oldest+uint64(i))
			}
		}
		if want := (r.head + r.n + ringChunk - 1) / ringChunk; len(r.chunks) != want {
			t.Fatalf("%d chunks for %d entries from %d: want %d", len(r.chunks), r.n, r.head, want)
		}
	}
	push(3*ringChunk + 7)
	check()
	pop(ringChunk + 5)
	check()
	push(2 * ringChunk)
	check()
	pop(r.len())
	check()
	if r.spare == nil {
		t.Fatal("an emptied chunk was not kept for reuse")
	}
	for i := range r.spare {
		if e := r.spare[i]; e.seq != 0 || e.size != 0 {
			t.Fatalf("popped entry %d still held: %+v", i, e)
		}
	}
	push(1)
	check()
}

// TestHistoryEntryStaysPacked: the ring holds entries by value and is
// most of the journal's memory, so a field added in the wrong place (a
// padding hole, a rare value inline) costs every entry. 120 bytes on a
// 64-bit platform: 152 before its fields were reordered and the rare
// third cause and error moved behind pointers.
func TestHistoryEntryStaysPacked(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are for 64-bit platforms")
	}
	if got := unsafe.Sizeof(historyEntry{}); got > 120 {
		t.Fatalf("historyEntry is %d bytes, want at most 120", got)
	}
}
