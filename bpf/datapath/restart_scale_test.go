package datapath_test

import (
	"net/netip"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/bpf/datapath"
	"github.com/lbstate/lbstate/lb"
)

// scaleService is service i of declareScale: its frontend and backends.
func scaleService(i, backends int) (lb.ServiceName, lb.FrontendParams, []lb.BackendParams) {
	name := lb.NewServiceName("scale", "svc-"+strconv.Itoa(i))
	fe := lb.FrontendParams{Address: lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{10, 100 + byte(i>>16), byte(i >> 8), byte(i)}), 80, lb.ScopeExternal), Type: lb.SVCTypeClusterIP}
	bes := make([]lb.BackendParams, backends)
	for j := range bes {
		k := i*backends + j
		bes[j] = lb.BackendParams{Address: lb.NewL3n4Addr(lb.ProtoTCP, netip.AddrFrom4([4]byte{172, 16 + byte(k>>16), byte(k >> 8), byte(k)}), 8080, lb.ScopeExternal), Weight: 100}
	}
	return name, fe, bes
}

// declareScale declares services x backends, random and Maglev in turn,
// a thousand services a transaction.
func declareScale(a *agent, services, backends int) {
	for first := 0; first < services; first += 1000 {
		a.write(func(txn statedb.WriteTxn) error {
			for i := first; i < min(first+1000, services); i++ {
				name, fe, bes := scaleService(i, backends)
				alg := lb.AlgorithmRandom
				if i%2 == 1 {
					alg = lb.AlgorithmMaglev
				}
				if err := a.w.UpsertService(txn, lb.ServiceParams{Name: name, Source: lb.SourceK8s, Algorithm: alg, Frontends: []lb.FrontendParams{fe}}); err != nil {
					return err
				}
				if err := a.w.SetBackends(txn, name, lb.SourceK8s, bes...); err != nil {
					return err
				}
			}
			return nil
		})
	}
}

// Established flows stay where they were across an agent restart at
// 2,000 services x 10 backends, 10,000 x 10 with LBSTATE_SCALE=1 (which
// took 114 s on a loaded machine), half of them Maglev: one flow per
// service, each with its conntrack entry, goes to the same backend while
// the restarted agent has restored the maps but its source has yet to
// declare anything, and once it declared the same services, synced and
// pruned; the conntrack entries are the same, and the restarted agent
// wrote no map entry. (At this scale the test runs in seconds; lbbench
// -restart checks the maps, not flows, at 100,000 x 10.)
func TestEstablishedFlowsStayAcrossARestartAtScale(t *testing.T) {
	services, backends := 2000, 10
	if os.Getenv("LBSTATE_SCALE") == "1" {
		services = 10000
	}
	cfg := bpftest.Config(t)
	cfg.LBMaglevTableSize = 251
	cfg.LBServicesMax = uint32(services*(1+backends) + 1024)
	cfg.LBBackendsMax = uint32(services*backends + 1024)
	cfg.LBRevNatMax = uint32(services + 1024)
	cfg.LBMaglevMax = uint32(services)
	cfg.LBCTMax = uint32(4 * services)
	maps := bpftest.KernelMaps(t, cfg)
	a := newAgent(t, maps, datapath.DefaultConfig)
	a.start()
	declareScale(a, services, backends)
	dp := loadDatapath(t, maps)
	var flows []*established
	for i := range services {
		_, fe, _ := scaleService(i, backends)
		flows = append(flows, establish(t, dp, fe.Address.AddrPort().String(), 1))
	}
	ctBefore := conntrackOf(t, maps)
	if len(ctBefore) < services {
		t.Fatalf("%d conntrack entries for %d flows", len(ctBefore), services)
	}
	a.stop()
	dp.Close()
	maps.Close()

	maps = bpftest.KernelMaps(t, cfg)
	a = newAgent(t, maps, datapath.DefaultConfig)
	synced, err := a.w.RegisterInitializer("test") // nothing is pruned before it synced
	if err != nil {
		t.Fatal(err)
	}
	a.start()
	defer a.stop()
	dp = loadDatapath(t, maps)
	for _, e := range flows {
		e.check(t, dp, "restored, before the source declared anything")
	}
	declareScale(a, services, backends)
	a.write(func(txn statedb.WriteTxn) error { synced(txn); return nil })
	// (A gather covers every backend's weight series: polled slowly.)
	deadline := time.Now().Add(time.Minute)
	for a.gatherOne("lbstate_reconciler_prune_duration_seconds")[""] == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the restarted agent did not prune in a minute")
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, e := range flows {
		e.check(t, dp, "after the restart, synced and pruned")
	}
	if ct := conntrackOf(t, maps); !sameConntrack(ctBefore, ct) {
		t.Errorf("conntrack entries changed across the restart: %d before, %d after", len(ctBefore), len(ct))
	}
	writes := a.gatherOne("lbstate_map_writes_total")
	if len(writes) == 0 {
		t.Fatal("no lbstate_map_writes_total")
	}
	for m, n := range writes {
		if n != 0 {
			t.Errorf("the restarted agent wrote %v entries of %s", n, m)
		}
	}
}

// gatherOne returns the samples of one metric family (a histogram's
// sample count) by the value of their one label ("" for none).
func (a *agent) gatherOne(name string) map[string]float64 {
	a.t.Helper()
	families, err := a.registry.Gather()
	if err != nil {
		a.t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			label := ""
			if ls := m.GetLabel(); len(ls) > 0 {
				label = ls[0].GetValue()
			}
			if h := m.GetHistogram(); h != nil {
				out[label] = float64(h.GetSampleCount())
			} else {
				out[label] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// conntrackOf returns lb_ct's entries' backends, by key.
func conntrackOf(t *testing.T, maps *bpf.Maps) map[bpf.CTKey]uint32 {
	t.Helper()
	out := map[bpf.CTKey]uint32{}
	if err := maps.Conntrack.Iterate(func(k bpf.CTKey, v bpf.CTValue) bool {
		out[k] = v.BackendID
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func sameConntrack(a, b map[bpf.CTKey]uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
