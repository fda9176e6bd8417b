package reconciler

import (
	"math/rand/v2"
	"testing"
)

// checkKeyIndex fails unless x holds exactly want, counts its live and
// deleted slots right, keeps an empty slot for every probe to stop at,
// and yields each address once.
func checkKeyIndex(t *testing.T, step int, x *keyIndex, want map[addrKey]uint32) {
	t.Helper()
	live, used := 0, 0
	for _, s := range x.slots {
		if s != 0 {
			used++
		}
		if uint32(s) != 0 {
			live++
		}
	}
	if live != x.n || used != x.used || x.n != len(want) {
		t.Fatalf("step %d: %d live slots, %d used; counted %d and %d; want %d", step, live, used, x.n, x.used, len(want))
	}
	if len(x.slots) > 0 && 8*x.used > 7*len(x.slots) {
		t.Fatalf("step %d: %d of %d slots used: a missed lookup may not stop", step, x.used, len(x.slots))
	}
	for k, i := range want {
		if got, ok := x.get(k); !ok || got != i {
			t.Fatalf("step %d: %v: got %d %v, want %d", step, k.l3n4(), got, ok, i)
		}
	}
	seen := map[addrKey]bool{}
	for k, i := range x.all() {
		if seen[k] || want[k] != i {
			t.Fatalf("step %d: all yields %v at %d (seen %v), want %d", step, k.l3n4(), i, seen[k], want[k])
		}
		seen[k] = true
	}
	if len(seen) != len(want) {
		t.Fatalf("step %d: all yields %d addresses, want %d", step, len(seen), len(want))
	}
}

// An index that only ever holds a few addresses, set and deleted
// millions of times over (backends flapping between two frontends),
// answers as a map does: the deleted slots it passes over are dropped
// before they fill the table, so a lookup of an address it does not hold
// still stops, and the table does not grow for them.
func TestKeyIndexSurvivesChurnWithoutGrowing(t *testing.T) {
	var arena testKeys
	x := newKeyIndex(func(i uint32) addrKey { return arena.keys[i] })
	want := map[addrKey]uint32{}
	rng := rand.New(rand.NewPCG(3, 4))
	const keys = 12 // at most 12 live: the smallest table has 16 slots
	for step := range 1_000_000 {
		a := testAddr(rng.IntN(keys) + step/1000*keys) // the addresses move on
		if _, ok := want[a]; ok || len(want) >= keys {
			for k := range want { // delete one held, so the table sees tombs
				x.del(k)
				delete(want, k)
				break
			}
			continue
		}
		i := arena.add(a)
		x.set(a, i)
		want[a] = i
		if step%9973 == 0 {
			checkKeyIndex(t, step, &x, want)
			if len(x.slots) > 2*keyIndexMin {
				t.Fatalf("step %d: %d live in %d slots", step, x.n, len(x.slots))
			}
		}
		if _, ok := x.get(testAddr(-1 - step)); ok {
			t.Fatalf("step %d: an address never set is found", step)
		}
	}
	checkKeyIndex(t, -1, &x, want)
}

// Random sets, overwrites (a state taken over under the same address),
// deletes, deletes while iterating, presizing and compaction, in a
// small space of addresses so that most slots are tombs at some point,
// leave the index answering as a Go map does after every operation.
func TestKeyIndexRandomOpsAnswerAsAMapDoes(t *testing.T) {
	for seed := range uint64(20) {
		var arena testKeys
		x := newKeyIndex(func(i uint32) addrKey { return arena.keys[i] })
		want := map[addrKey]uint32{}
		rng := rand.New(rand.NewPCG(seed, 99))
		space := 1 + rng.IntN(300)
		for step := range 20000 {
			switch op := rng.IntN(100); {
			case op < 45:
				a := testAddr(rng.IntN(space))
				i := arena.add(a)
				x.set(a, i)
				want[a] = i
			case op < 90:
				a := testAddr(rng.IntN(space))
				x.del(a)
				delete(want, a)
			case op < 94: // delete about half while iterating
				for k := range x.all() {
					if rng.IntN(2) == 0 {
						x.del(k)
						delete(want, k)
					}
				}
			case op < 97:
				x.compact()
			default:
				x.presize(rng.IntN(2 * space)) // does nothing unless empty
			}
			checkKeyIndex(t, step, &x, want)
		}
	}
}
