package reconciler

// weightedSlots returns how many service slots each backend gets under the
// random algorithm, so that a uniformly random slot picks a backend in
// proportion to its weight. Weights are reduced by their greatest common
// divisor; when that still needs more than maxSlots slots, they are scaled
// down to about maxSlots in all, every backend keeping at least one.
// All weights are above 0.
func weightedSlots(weights []uint16, maxSlots int) []int {
	counts := make([]int, len(weights))
	if len(weights) == 0 {
		return counts
	}
	g, sum := 0, 0
	for _, w := range weights {
		g = gcd(g, int(w))
		sum += int(w)
	}
	if sum/g <= maxSlots {
		for i, w := range weights {
			counts[i] = int(w) / g
		}
		return counts
	}
	for i, w := range weights {
		// Round to nearest, with at least one slot.
		counts[i] = max(1, (int(w)*maxSlots+sum/2)/sum)
	}
	return counts
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
