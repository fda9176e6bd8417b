package smallset_test

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/lbstate/lbstate/internal/smallset"
	"github.com/lbstate/lbstate/lb"
)

var sink bool

func addrs(n int) []lb.L3n4Addr {
	out := make([]lb.L3n4Addr, n)
	for i := range out {
		out[i] = lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 8080, lb.ScopeExternal)
	}
	return out
}

// BenchmarkLookup compares Set.Has with a search of a slice and with a Go
// map, on as many absent keys as present ones: at every size it should
// be about as fast as the faster of the two, which is what sets Max.
func BenchmarkLookup(b *testing.B) {
	for _, n := range []int{2, 8, 16, 32, 33, 128} {
		keys := addrs(n)
		probe := addrs(2 * n)
		var set smallset.Set[lb.L3n4Addr]
		m := make(map[lb.L3n4Addr]struct{}, n)
		for _, k := range keys {
			set.Add(k)
			m[k] = struct{}{}
		}
		b.Run(fmt.Sprintf("n=%d/Set", n), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				sink = set.Has(probe[i%len(probe)])
			}
		})
		b.Run(fmt.Sprintf("n=%d/slice", n), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				sink = slices.Contains(keys, probe[i%len(probe)])
			}
		})
		b.Run(fmt.Sprintf("n=%d/map", n), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				_, sink = m[probe[i%len(probe)]]
			}
		})
	}
}

// BenchmarkIndex is the pattern of the Writer's SetBackends and the
// reconciler's releaseUnused: which of a frontend's current backends does
// its new list keep? "handRolled" is the code Index replaced there: a
// search of the list up to 8 backends, a map built from it beyond.
func BenchmarkIndex(b *testing.B) {
	type backend struct {
		Address lb.L3n4Addr
		Weight  uint16
		State   uint8
		Zone    string
	}
	for _, n := range []int{1, 4, 8, 16, 32, 100, 1000} {
		all := addrs(n + n/4)
		list := make([]backend, n) // the new list drops the first n/4
		for i := range list {
			list[i] = backend{Address: all[n/4+i], Weight: 100}
		}
		cur := all[:n]
		b.Run(fmt.Sprintf("n=%d/Index", n), func(b *testing.B) {
			for b.Loop() {
				keep := smallset.NewIndex(func(be *backend) lb.L3n4Addr { return be.Address })
				dropped := 0
				for _, a := range cur {
					if !keep.Has(list, a) {
						dropped++
					}
				}
				sink = dropped > 0
			}
		})
		b.Run(fmt.Sprintf("n=%d/handRolled", n), func(b *testing.B) {
			for b.Loop() {
				var keep map[lb.L3n4Addr]bool
				if len(list) > 8 {
					keep = make(map[lb.L3n4Addr]bool, len(list))
					for _, be := range list {
						keep[be.Address] = true
					}
				}
				dropped := 0
				for _, a := range cur {
					if keep != nil && !keep[a] || keep == nil && !slices.ContainsFunc(list, func(be backend) bool { return be.Address == a }) {
						dropped++
					}
				}
				sink = dropped > 0
			}
		})
	}
}
