package health

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// Under random puts, moves, removals and pops, the queue hands targets
// out in due order and keeps every target's index right.
func TestDueQueueOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q dueQueue
	var all []*target
	for range 20000 {
		switch op := rng.IntN(10); {
		case op < 4 || len(all) == 0:
			tg := &target{index: -1, due: time.Duration(rng.IntN(1000))}
			all = append(all, tg)
			q.put(tg)
		case op < 6:
			tg := all[rng.IntN(len(all))]
			tg.due = time.Duration(rng.IntN(1000))
			q.put(tg)
		case op < 7:
			i := rng.IntN(len(all))
			q.remove(all[i])
			all = slices.Delete(all, i, i+1)
		default:
			if q.Len() == 0 {
				continue
			}
			got := q.pop()
			for _, tg := range all {
				if tg.index >= 0 && tg.due < got.due {
					t.Fatalf("popped due %d before %d", got.due, tg.due)
				}
			}
			i := slices.Index(all, got)
			all = slices.Delete(all, i, i+1)
		}
		for i, e := range q {
			if e.t.index != i || e.due != e.t.due {
				t.Fatalf("entry %d: index %d, due %d (target's %d)", i, e.t.index, e.due, e.t.due)
			}
		}
	}
}
