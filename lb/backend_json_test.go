package lb

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

// A backend row's JSON is the same bytes as json.Marshal writes of its
// backendRow, for random rows with every optional field present or not:
// the hand-written encoder cannot drift from the reflective one.
func TestBackendJSONAsReflected(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pick := func(ss ...string) []string {
		var out []string
		for _, s := range ss {
			if rng.IntN(2) == 0 {
				out = append(out, s)
			}
		}
		return out
	}
	for i := range 3000 {
		addr := NewL3n4Addr(ProtoTCP, netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), uint16(rng.IntN(65536)), ScopeExternal)
		if rng.IntN(3) == 0 {
			addr = NewL3n4Addr(ProtoUDP, netip.MustParseAddr(fmt.Sprintf("fd00::%x", i)), 53, ScopeInternal)
		}
		b := Backend{Address: addr, Unhealthy: rng.IntN(4) == 0}
		if rng.IntN(5) > 0 {
			b.Instances = []BackendInstance{}
		}
		for range rng.IntN(3) {
			p := BackendParams{Address: addr, Weight: uint16(rng.IntN(3) * 50), ClusterID: uint32(rng.IntN(2) * 7),
				State: BackendState(rng.IntN(5))}
			if n := pick("node-a"); len(n) > 0 {
				p.NodeName = n[0]
			}
			if z := pick("zone<&>"); len(z) > 0 {
				p.Zone = z[0]
			}
			p = p.WithPortNames(pick("http", "metrics")...).WithTopologyHints(pick("z1", "z2"), pick("n1"))
			b.Instances = append(b.Instances, BackendInstance{Service: NewServiceName("ns", fmt.Sprintf("svc-%d", rng.IntN(9))),
				Source: []Source{SourceK8s, SourceAPI, SourceKVStore}[rng.IntN(3)], Params: p})
		}
		if rng.IntN(4) == 0 {
			b.health = &healthDetails{err: []string{"", "connect: refused \"x\""}[rng.IntN(2)]}
			if rng.IntN(2) == 0 {
				b.health.since = time.Date(2026, 11, 26, 9, 0, rng.IntN(60), rng.IntN(1e9), time.UTC)
			}
		}
		got, err := json.Marshal(&b)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(b.row())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("backend %d:\n got %s\nwant %s", i, got, want)
		}
	}
}
