package tables

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lbstate/lbstate/lb"
)

// mergeAddrs merges instead of sorting a service's every address: it must
// give what sorting cur and added together, without duplicates and
// without removed, gave.
func TestMergeAddrsIsSortedUnionWithoutRemoved(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	addr := func() lb.L3n4Addr {
		return lb.MustParseL3n4Addr(fmt.Sprintf("10.0.0.%d:%d/TCP", rnd.IntN(8), 80+rnd.IntN(3)))
	}
	some := func(n int) []lb.L3n4Addr {
		out := make([]lb.L3n4Addr, rnd.IntN(n+1))
		for i := range out {
			out[i] = addr()
		}
		return out
	}
	for range 2000 {
		cur := slices.Compact(slices.SortedFunc(slices.Values(some(12)), lb.L3n4Addr.Compare))
		added, removed := some(6), some(4)
		want := slices.Compact(slices.SortedFunc(slices.Values(append(slices.Clone(cur), added...)), lb.L3n4Addr.Compare))
		want = slices.DeleteFunc(want, func(a lb.L3n4Addr) bool { return slices.Contains(removed, a) })
		got := mergeAddrs(nil, cur, slices.Clone(added), slices.Clone(removed))
		if !slices.Equal(got, want) && (len(got) > 0 || len(want) > 0) {
			t.Fatalf("mergeAddrs(%v, +%v, -%v) = %v, want %v", cur, added, removed, got, want)
		}
	}
}
