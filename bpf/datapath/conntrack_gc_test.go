package datapath_test

import (
	"testing"
	"time"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/bpf/datapath"
)

// While the datapath is attached, the agent's garbage collector deletes
// expired lb_ct entries and keeps live ones, and reports the map's
// entries, the expired entries it removed and the map's pressure.
func TestConntrackGCRemovesExpiredEntriesAndReportsIt(t *testing.T) {
	maps := kernelMaps(t, 0)
	cfg := datapath.DefaultConfig
	cfg.LBDatapath, cfg.LBCgroup, cfg.LBCTGCInterval = datapath.ModeSocket, bpftest.Cgroup(t), 50*time.Millisecond
	a := newAgent(t, maps, cfg)
	now := bpf.MonotonicSeconds()
	// A flow's one entry, as the datapath writes it (a live flow with
	// two entries would get a marker beside them: CollectConntrack).
	live := bpf.NewCTClientKey(addrPort("192.0.2.1:40000"), 6)
	var dead []bpf.CTKey
	for i := range 10 {
		dead = append(dead, bpf.NewCTKey(addrPort("192.0.2.2:40000"), addrPort("10.96.0.1:80"), 6))
		dead[i].SPort = [2]byte{0x9c, byte(i)}
		if err := maps.Conntrack.Update(dead[i], bpf.CTValue{BackendID: 1, RevNatID: 1, Expires: now - 2}); err != nil {
			t.Fatal(err)
		}
	}
	if err := maps.Conntrack.Update(live, bpf.CTValue{BackendID: 1, RevNatID: 1, Expires: now + 3600, Dir: bpf.CTFlow}); err != nil {
		t.Fatal(err)
	}
	a.start()
	defer a.stop()

	value := func(name string) (float64, bool) {
		families, err := a.registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != name {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "map" && l.GetValue() == "lb_ct" {
						return m.GetCounter().GetValue() + m.GetGauge().GetValue(), true
					}
				}
			}
		}
		return 0, false
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		removed, _ := value("lbstate_datapath_conntrack_expired_removed_total")
		if removed == 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the collector removed %v expired entries in 10 s, want 10", removed)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, k := range dead {
		if _, ok, err := maps.Conntrack.Lookup(k); err != nil || ok {
			t.Errorf("expired entry %v still there (%v)", k, err)
		}
	}
	if _, ok, err := maps.Conntrack.Lookup(live); err != nil || !ok {
		t.Errorf("the live entry is gone (%v)", err)
	}
	// After the collection that removed them, the map holds the live one.
	deadline = time.Now().Add(10 * time.Second)
	for {
		entries, _ := value("lbstate_datapath_conntrack_entries")
		pressure, ok := value("lbstate_datapath_conntrack_map_pressure")
		capacity, _ := maps.Capacity(maps.Conntrack.Name())
		if entries == 1 && ok && pressure == 1/float64(capacity.MaxEntries) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("entries %v, pressure %v (%v): want 1 and 1/%d", entries, pressure, ok, capacity.MaxEntries)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
