package maglev

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func backends(weights ...uint16) []Backend {
	out := make([]Backend, len(weights))
	for i, w := range weights {
		out[i] = Backend{Key: fmt.Appendf(nil, "10.0.%03d.%03d:8080/TCP", i/256, i%256), Weight: w}
	}
	return out
}

func equalWeights(n int) []Backend {
	ws := make([]uint16, n)
	for i := range ws {
		ws[i] = 100
	}
	return backends(ws...)
}

func counts(table []uint32, n int) []int {
	c := make([]int, n)
	for _, i := range table {
		c[i]++
	}
	return c
}

func TestDistributionFollowsWeights(t *testing.T) {
	for _, tc := range []struct {
		name    string
		weights []uint16
		m       int
	}{
		{"equal", []uint16{100, 100, 100, 100, 100, 100, 100}, DefaultTableSize},
		{"canary 90/10", []uint16{90, 10}, DefaultTableSize},
		{"1 to 10", []uint16{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, DefaultTableSize},
		{"with zero", []uint16{100, 0, 50, 0}, DefaultTableSize},
		{"extremes", []uint16{65535, 1, 30000}, DefaultTableSize},
		{"small table", []uint16{3, 1}, 251},
		{"large table", []uint16{5, 3, 2, 1}, MaxTableSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table, err := Compute(backends(tc.weights...), tc.m, 0)
			if err != nil {
				t.Fatal(err)
			}
			var sum float64
			for _, w := range tc.weights {
				sum += float64(w)
			}
			c := counts(table, len(tc.weights))
			for i, w := range tc.weights {
				want := float64(tc.m) * float64(w) / sum
				if w == 0 && c[i] != 0 {
					t.Errorf("backend %d of weight 0 got %d slots", i, c[i])
				}
				if diff := math.Abs(float64(c[i]) - want); diff > 0.01*float64(tc.m) {
					t.Errorf("backend %d (weight %d): %d slots, want %.0f ± %.0f", i, w, c[i], want, 0.01*float64(tc.m))
				}
			}
			t.Logf("slots per backend: %v", c)
		})
	}
}

// Removing one of N backends moves few slots besides that backend's own.
// Averaged over every backend that could be removed, at most 1.5/N of the
// table for N up to 100 at the default size; the worst single removal and
// larger N are logged. (Maglev's population cascades: the slots moved grow
// slowly with N, about 1% of the table at N=100.)
func TestDisruptionOnRemoval(t *testing.T) {
	for _, tc := range []struct {
		n, m   int
		assert bool
	}{
		{5, DefaultTableSize, true}, {20, DefaultTableSize, true}, {50, DefaultTableSize, true},
		{100, DefaultTableSize, true}, {300, 65521, false}, {1000, MaxTableSize, false},
	} {
		t.Run(fmt.Sprintf("N=%d/M=%d", tc.n, tc.m), func(t *testing.T) {
			bs := equalWeights(tc.n)
			before, err := Compute(bs, tc.m, 0)
			if err != nil {
				t.Fatal(err)
			}
			removals := make([]int, 0, tc.n)
			for r := 0; r < tc.n; r += max(1, tc.n/100) {
				removals = append(removals, r)
			}
			total, worst := 0, 0
			for _, removed := range removals {
				rest := append(append([]Backend{}, bs[:removed]...), bs[removed+1:]...)
				after, err := Compute(rest, tc.m, 0)
				if err != nil {
					t.Fatal(err)
				}
				moved := 0
				for slot := range before {
					if int(before[slot]) != removed && string(bs[before[slot]].Key) != string(rest[after[slot]].Key) {
						moved++
					}
				}
				total += moved
				worst = max(worst, moved)
			}
			perN := func(moved float64) float64 { return moved * float64(tc.n) / float64(tc.m) }
			mean := perN(float64(total) / float64(len(removals)))
			t.Logf("slots moved besides the removed backend's: mean %.2f/N, worst %.2f/N (%d removals)", mean, perN(float64(worst)), len(removals))
			if tc.assert && mean > 1.5 {
				t.Errorf("mean disruption %.2f/N, want at most 1.5/N", mean)
			}
		})
	}
}

func TestIndependentOfOrder(t *testing.T) {
	bs := backends(10, 20, 30, 40, 50, 60, 70, 80)
	want, err := Compute(bs, 1021, 7)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 5 {
		perm := r.Perm(len(bs))
		shuffled := make([]Backend, len(bs))
		for i, p := range perm {
			shuffled[i] = bs[p]
		}
		got, err := Compute(shuffled, 1021, 7)
		if err != nil {
			t.Fatal(err)
		}
		for slot := range got {
			if string(shuffled[got[slot]].Key) != string(bs[want[slot]].Key) {
				t.Fatalf("slot %d differs after shuffling the input", slot)
			}
		}
	}
}

func TestSeedChangesTable(t *testing.T) {
	a, _ := Compute(equalWeights(10), 1021, 1)
	b, _ := Compute(equalWeights(10), 1021, 2)
	c, _ := Compute(equalWeights(10), 1021, 1)
	same := 0
	for i := range a {
		if a[i] == b[i] {
			same++
		}
		if a[i] != c[i] {
			t.Fatal("same seed, different table")
		}
	}
	if same > len(a)/2 {
		t.Errorf("seeds 1 and 2 agree on %d of %d slots", same, len(a))
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		bs   []Backend
		m    int
		want string
	}{
		{"not prime", equalWeights(2), 16384, "must be a prime"},
		{"too large", equalWeights(2), 131101, "must be a prime between 2 and 131071"},
		{"all zero", backends(0, 0), 251, "no backend with a weight above 0"},
		{"none", nil, 251, "no backend with a weight above 0"},
		{"too many", equalWeights(300), 251, "300 backends do not fit in a table of 251 slots"},
		{"duplicate", []Backend{{Key: []byte("a"), Weight: 1}, {Key: []byte("a"), Weight: 2}}, 251, "duplicate backend key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compute(tc.bs, tc.m, 0)
			if err == nil || !contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	if ValidateTableSize(DefaultTableSize) != nil || ValidateTableSize(MaxTableSize) != nil {
		t.Error("the default and maximum sizes must be valid")
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// computeMaterialised is the textbook population with the whole N×M
// permutation table built first. It is the reference the benchmarks
// compare Compute against, and equal weights must give the same table.
func computeMaterialised(bs []Backend, m int, seed uint32) []uint32 {
	n := len(bs)
	perm := make([][]uint32, n)
	for i, b := range bs {
		offset, skip := permutation(b.Key, seed, uint32(m))
		perm[i] = make([]uint32, m)
		for j := range m {
			perm[i][j] = uint32((uint64(offset) + uint64(j)*uint64(skip)) % uint64(m))
		}
	}
	next := make([]int, n)
	table := make([]uint32, m)
	for i := range table {
		table[i] = ^uint32(0)
	}
	for filled := 0; ; {
		for i := range n {
			c := perm[i][next[i]]
			for table[c] != ^uint32(0) {
				next[i]++
				c = perm[i][next[i]]
			}
			table[c] = uint32(i)
			next[i]++
			if filled++; filled == m {
				return table
			}
		}
	}
}

// With equal weights, Compute is the textbook algorithm.
func TestEqualWeightsMatchTextbook(t *testing.T) {
	bs := equalWeights(50) // keys sort in index order, so indices agree
	got, err := Compute(bs, 4093, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := computeMaterialised(bs, 4093, 3)
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("slot %d: %d, textbook says %d", i, got[i], want[i])
		}
	}
}

func BenchmarkMaglev(b *testing.B) {
	for _, m := range []int{4093, DefaultTableSize, 65521, MaxTableSize} {
		for _, n := range []int{10, 100, 1000} {
			bs := equalWeights(n)
			table := make([]uint32, m)
			b.Run(fmt.Sprintf("M=%d/N=%d", m, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := Fill(table, bs, 0); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkMaglevMaterialised(b *testing.B) {
	for _, n := range []int{100, 1000} {
		bs := equalWeights(n)
		b.Run(fmt.Sprintf("M=%d/N=%d", DefaultTableSize, n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				computeMaterialised(bs, DefaultTableSize, 0)
			}
		})
	}
}
