package reconciler

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// flakyBackendsDelete makes lb_backends' deletes fail at random, after
// deleting a prefix of a batch, as the bpf.Map contract allows.
type flakyBackendsDelete struct {
	bpf.Map[uint32, bpf.Backend]
	rng *rand.Rand
}

func (f *flakyBackendsDelete) BatchDelete(ks []uint32) error {
	if len(ks) > 0 && f.rng.IntN(4) == 0 {
		n := f.rng.IntN(len(ks))
		if err := f.Map.BatchDelete(ks[:n]); err != nil {
			return err
		}
		return fmt.Errorf("%s: batch delete: injected failure after %d of %d keys", f.Name(), n, len(ks))
	}
	return f.Map.BatchDelete(ks)
}

func (f *flakyBackendsDelete) Delete(k uint32) error {
	if f.rng.IntN(4) == 0 {
		return fmt.Errorf("%s: delete %d: injected failure", f.Name(), k)
	}
	return f.Map.Delete(k)
}

// checkBackendIndexes fails unless every backend state is found by its
// address in exactly one of o.backends and o.restoredBackends, under the
// arena index that holds it, the indexes hold nothing else, and every
// state's ID is in lb_backends or waits for a prune (restored).
func checkBackendIndexes(t *testing.T, step string, o *ops) {
	t.Helper()
	held := map[uint32]string{} // arena index: which index holds it
	byKey := map[addrKey]uint32{}
	for name, x := range map[string]*keyIndex{"backends": &o.backends, "restoredBackends": &o.restoredBackends} {
		n := 0
		for k, i := range x.all() {
			n++
			if other, ok := held[i]; ok {
				t.Fatalf("%s: arena index %d (%v) is in %s and %s", step, i, k.l3n4(), other, name)
			}
			if j, ok := byKey[k]; ok {
				t.Fatalf("%s: %v is at %d in %s and at %d in %s", step, k.l3n4(), i, name, j, held[j])
			}
			held[i], byKey[k] = name, i
			be := o.beStates.at(i)
			if be.id == 0 || be.key != k {
				t.Fatalf("%s: %s holds %v at %d, a state of %v with ID %d (released?)", step, name, k.l3n4(), i, be.key.l3n4(), be.id)
			}
			if got, ok := x.get(k); !ok || got != i {
				t.Fatalf("%s: %s finds %v at %d %v, all yields %d", step, name, k.l3n4(), got, ok, i)
			}
		}
		if n != x.len() {
			t.Fatalf("%s: %s yields %d, counts %d", step, name, n, x.len())
		}
	}
	live := 0
	for _, n := range o.beStates.live {
		live += int(n)
	}
	if live != len(held) {
		t.Fatalf("%s: %d backend states live, %d indexed: a state no index finds", step, live, len(held))
	}
	for _, i := range o.backends.all() {
		be := o.beStates.at(i)
		if ok, _ := bpfHas(o.maps.Backends, be.id); be.written && !ok {
			t.Fatalf("%s: backend %v (ID %d) in use, written, missing from lb_backends", step, be.key.l3n4(), be.id)
		}
	}
}

func bpfHas(m bpf.Map[uint32, bpf.Backend], id uint32) (bool, error) {
	_, ok, err := m.Lookup(id)
	return ok, err
}

// Frontends moving among shared backends at random, deleted, pruned, on
// maps whose backend deletes fail at random, across restarts over the
// same maps (which restore and park what no frontend claims yet), keep
// every backend state in exactly one index, under its own address, until
// its arena index is released: no state is released while an index
// holds it, and none is left without one.
func TestBackendIndexesHoldEachLiveStateOnceUnderChurnAndFailures(t *testing.T) {
	ctx := context.Background()
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 7))
		raw, err := bpf.NewMemoryMaps(bpf.DefaultConfig, nil)
		if err != nil {
			t.Fatal(err)
		}
		maps := *raw
		maps.Backends = &flakyBackendsDelete{Map: raw.Backends, rng: rng}
		s, err := DefaultConfig.settings()
		if err != nil {
			t.Fatal(err)
		}
		start := func() *ops {
			o, err := newOps(&maps, s, slog.New(slog.DiscardHandler), nil)
			if err != nil {
				t.Fatal(err)
			}
			// Not initialized until the first prune: unused backends park.
			o.tableInitialized = func(statedb.ReadTxn) bool { return false }
			return o
		}
		o := start()
		declared := map[int]*lb.Frontend{}
		const frontends, pool = 12, 30
		for step := range 600 {
			label := fmt.Sprintf("seed %d step %d", seed, step)
			switch op := rng.IntN(100); {
			case op < 60:
				f := rng.IntN(frontends)
				var bes []string
				for range rng.IntN(6) {
					bes = append(bes, fmt.Sprintf("10.9.0.%d:8080/TCP", 1+rng.IntN(pool)))
				}
				fe := clusterIPFrontend(fmt.Sprintf("10.96.9.%d:80/TCP", 1+f), dedup(bes)...)
				if o.Update(ctx, nil, 0, fe) == nil {
					declared[f] = fe
				}
			case op < 80:
				f := rng.IntN(frontends)
				if fe, ok := declared[f]; ok && o.Delete(ctx, nil, 0, fe) == nil {
					delete(declared, f)
				}
			case op < 95:
				o.Prune(ctx, nil, func(yield func(*lb.Frontend, statedb.Revision) bool) {
					for _, fe := range declared {
						if !yield(fe, 0) {
							return
						}
					}
				})
			default:
				o = start() // the old one's state is dropped, as a process's
				label += " (restarted)"
			}
			checkBackendIndexes(t, label, o)
		}
	}
}

func dedup(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
