package tables

import (
	"math"
	"math/big"
	"slices"

	"github.com/lbstate/lbstate/lb"
)

// SplitGroup is one backend service of a route, for SplitBackends: its
// route weight and its own selection (SelectBackends: the backends
// taking new flows have a weight above 0).
type SplitGroup struct {
	Weight   uint32
	Backends []lb.BackendRef
}

// SplitBackends combines the selections of a route's backend services
// into one: a backend taking new flows in group g gets the weight
//
//	g.Weight / (sum of the weights of the groups)
//	  × its own weight / (sum of its group's own weights),
//
// the product computed exactly and reduced as a ratio. A group of weight
// above 0 without a backend taking new flows (a service that is missing,
// lacks the port, or has no backend that takes new flows) does not
// resolve: its share is rejected, as the Gateway API requires of an
// invalid backendRef, rather than given to the others. The second result
// is that rejected weight, on the same scale as the backends' (0 when
// every group resolves). Only when the reduced weights do not fit the
// datapath's 16 bits are they scaled down (to 65535 at most, rounded,
// each at least 1): the finest split of one frontend is then 1/65535
// (and the random algorithm's slots, or the Maglev table, are coarser
// still).
//
// A group of weight 0 gets no share; its backends, and every backend
// when no group takes new flows, stay with weight 0, on standby for the
// flows they carry. A backend in several groups gets the sum of its
// shares. The backends are sorted as SelectBackends sorts.
func SplitBackends(groups []SplitGroup) ([]lb.BackendRef, uint16) {
	type acc struct {
		ref    lb.BackendRef
		weight *big.Int
	}
	var (
		out   []acc
		index = map[lb.L3n4Addr]int{}
	)
	add := func(r lb.BackendRef, w *big.Int) {
		if i, ok := index[r.Address]; ok {
			if w != nil {
				out[i].weight.Add(out[i].weight, w)
			}
			return
		}
		index[r.Address] = len(out)
		out = append(out, acc{ref: r, weight: w})
	}

	// lcm of the groups' own sums, so that every share is an integer.
	sums := make([]uint64, len(groups))
	lcm := big.NewInt(1)
	for i, g := range groups {
		if g.Weight == 0 {
			continue
		}
		for _, b := range g.Backends {
			sums[i] += uint64(b.Weight)
		}
		if sums[i] > 0 {
			s := new(big.Int).SetUint64(sums[i])
			gcd := new(big.Int).GCD(nil, nil, lcm, s)
			lcm.Mul(lcm, s.Div(s, gcd))
		}
	}
	// The groups that do not resolve: their share, on the lcm's scale.
	rejected := new(big.Int)
	for i, g := range groups {
		if g.Weight > 0 && sums[i] == 0 {
			rejected.Add(rejected, new(big.Int).SetUint64(uint64(g.Weight)))
		}
	}
	rejected.Mul(rejected, lcm)
	// First every backend taking new flows, so that one that is also on
	// standby in another group takes its share.
	for i, g := range groups {
		if sums[i] == 0 {
			continue
		}
		scale := new(big.Int).Div(lcm, new(big.Int).SetUint64(sums[i]))
		scale.Mul(scale, new(big.Int).SetUint64(uint64(g.Weight)))
		for _, b := range g.Backends {
			if b.Weight > 0 {
				add(b, new(big.Int).Mul(scale, new(big.Int).SetUint64(uint64(b.Weight))))
			}
		}
	}
	for _, g := range groups {
		for _, b := range g.Backends {
			add(b, nil) // on standby, unless it takes new flows in a group
		}
	}

	// Reduce by the greatest common divisor, then scale down if needed.
	gcd, maxW := new(big.Int).Set(rejected), new(big.Int).Set(rejected)
	for _, a := range out {
		if a.weight != nil {
			gcd.GCD(nil, nil, gcd, a.weight)
			if a.weight.Cmp(maxW) > 0 {
				maxW.Set(a.weight)
			}
		}
	}
	limit := big.NewInt(math.MaxUint16)
	if gcd.Sign() > 0 {
		maxW.Div(maxW, gcd)
	}
	scaled := func(weight *big.Int) uint16 {
		if weight == nil || weight.Sign() == 0 {
			return 0
		}
		w := new(big.Int).Div(weight, gcd)
		if maxW.Cmp(limit) > 0 {
			// round(w × limit / max), at least 1
			w.Mul(w, limit)
			w.Add(w, new(big.Int).Rsh(maxW, 1))
			w.Div(w, maxW)
			if w.Sign() == 0 {
				w.SetInt64(1)
			}
		}
		return uint16(w.Uint64())
	}
	refs := make([]lb.BackendRef, len(out))
	for i, a := range out {
		refs[i] = a.ref
		refs[i].Weight = scaled(a.weight)
	}
	slices.SortFunc(refs, compareSelected)
	return refs, scaled(rejected)
}

// compareSelected orders selected backends: those taking new flows first,
// each group by address.
func compareSelected(a, b lb.BackendRef) int {
	if (a.Weight > 0) != (b.Weight > 0) {
		if a.Weight > 0 {
			return -1
		}
		return 1
	}
	return a.Address.Compare(b.Address)
}
