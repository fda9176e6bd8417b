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

// BenchmarkMergeAddrs measures a remote cluster's change of a service
// with 110 backend addresses: "release" removes ten of them, "add" adds
// ten new ones.
func BenchmarkMergeAddrs(b *testing.B) {
	addrs := make([]lb.L3n4Addr, 120)
	for i := range addrs {
		addrs[i] = lb.MustParseL3n4Addr(fmt.Sprintf("10.%d.0.%d:8080/TCP", i%11, i))
	}
	slices.SortFunc(addrs, lb.L3n4Addr.Compare)
	cur, fresh := addrs[:110], addrs[110:]
	var ten []lb.L3n4Addr
	for i := 5; i < 110; i += 11 {
		ten = append(ten, cur[i])
	}
	buf := make([]lb.L3n4Addr, 0, 120)
	b.Run("release", func(b *testing.B) {
		for b.Loop() {
			buf = mergeAddrs(buf[:0], cur, nil, ten)
		}
	})
	b.Run("add", func(b *testing.B) {
		for b.Loop() {
			buf = mergeAddrs(buf[:0], cur, fresh, nil)
		}
	})
}
