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
//	g.Weight / (sum of the weights of the groups that take new flows)
//	  × its own weight / (sum of its group's own weights),
//
// the product computed exactly and reduced as a ratio. Only when the
// reduced weights do not fit the datapath's 16 bits are they scaled down
// (to 65535 at most, rounded, each at least 1): the finest split of one
// frontend is then 1/65535 (and the random algorithm's slots, or the
// Maglev table, are coarser still).
//
// A group of weight 0, or without a backend taking new flows (a service
// that is missing, or has none), gets no share; its backends, and every
// backend when no group takes new flows, stay with weight 0, on standby
// for the flows they carry. A backend in several groups gets the sum of
// its shares. The result is sorted as SelectBackends sorts.
func SplitBackends(groups []SplitGroup) []lb.BackendRef {
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
	gcd, maxW := new(big.Int), new(big.Int)
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
	refs := make([]lb.BackendRef, len(out))
	for i, a := range out {
		refs[i] = a.ref
		refs[i].Weight = 0
		if a.weight == nil {
			continue
		}
		w := new(big.Int).Div(a.weight, gcd)
		if maxW.Cmp(limit) > 0 {
			// round(w × limit / max), at least 1
			w.Mul(w, limit)
			w.Add(w, new(big.Int).Rsh(maxW, 1))
			w.Div(w, maxW)
			if w.Sign() == 0 {
				w.SetInt64(1)
			}
		}
		refs[i].Weight = uint16(w.Uint64())
	}
	slices.SortFunc(refs, compareSelected)
	return refs
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
