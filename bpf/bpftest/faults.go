package bpftest

import (
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/lbstate/lbstate/bpf"
)

// Faults is a bpf.FaultHook that fails each mutating operation of
// in-memory maps (and each element of a batch) with a fixed probability,
// from a seeded generator so that a run repeats. A nil *Faults injects
// none.
type Faults struct {
	mu          sync.Mutex
	probability float64
	rng         *rand.Rand
	injected    int
}

// NewFaults returns a fault injector failing with the given probability,
// seeded with seed.
func NewFaults(probability float64, seed uint64) *Faults {
	return &Faults{probability: probability, rng: rand.New(rand.NewPCG(seed, seed^0x5eed))}
}

// Injected returns how many failures have been injected.
func (f *Faults) Injected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected
}

// SetProbability changes the failure probability (0 stops the faults).
func (f *Faults) SetProbability(p float64) {
	f.mu.Lock()
	f.probability = p
	f.mu.Unlock()
}

// Fail implements bpf.FaultHook.
func (f *Faults) Fail(mapName, op string) error {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.probability > 0 && f.rng.Float64() < f.probability {
		f.injected++
		return fmt.Errorf("%s: %s: injected fault", mapName, op)
	}
	return nil
}

var _ bpf.FaultHook = (*Faults)(nil)
