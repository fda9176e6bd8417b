package reconciler_test

// Full maps: when not every frontend fits, the oldest ones (lowest
// frontend ID) are served, whole, and the others wait, holding nothing,
// until room frees.

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/statedb"
	statedbreconciler "github.com/cilium/statedb/reconciler"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reconciler"
	"github.com/lbstate/lbstate/tables"
)

// onBothMapKindsWith is onBothMapKinds with maps sized by cfg.
func onBothMapKindsWith(t *testing.T, cfg bpf.Config, fn func(t *testing.T, maps *bpf.Maps)) {
	t.Run("memory", func(t *testing.T) {
		maps, err := bpf.NewMemoryMaps(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		fn(t, maps)
	})
	t.Run("kernel", func(t *testing.T) {
		c := cfg
		c.LBPinDir = bpftest.Config(t).LBPinDir
		fn(t, bpftest.KernelMaps(t, c))
	})
}

// roomCase is a map too small for seven services of k backends each.
type roomCase struct {
	name, flag string
	size       func(*bpf.Config)
	k          int // backends per service
	fit        int // services that fit
	per        int // entries a service has in the map
}

var roomCases = []roomCase{
	// 2 entries a service (the master, holding bpf.InlineSlots slots, and
	// the one slot past them): 5 of 7 fit in 10.
	{"lb_services", "--lb-services-max", func(c *bpf.Config) { c.LBServicesMax = 10 }, bpf.InlineSlots + 1, 5, 2},
	// 2 backends a service: 3 of 7 fit in 6.
	{"lb_backends", "--lb-backends-max", func(c *bpf.Config) { c.LBBackendsMax = 6 }, 2, 3, 2},
	// A frontend ID each, which holds one of lb_rev_nat's slots: 4 of 7
	// fit in 4. (Once, a frontend that got no ID was not counted, not
	// logged, and got freed room only after its backoff.)
	{"lb_rev_nat", "--lb-rev-nat-max", func(c *bpf.Config) { c.LBRevNatMax = 4 }, 1, 4, 1},
}

// fullVIP and fullBackend are the addresses of service i of the tests
// below and of its backend j.
func fullVIP(i int) string { return fmt.Sprintf("10.96.9.%d:80/TCP", i) }

func fullBackends(i, k int) []lb.BackendParams {
	out := make([]lb.BackendParams, k)
	for j := range out {
		out[j] = be(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 9, byte(i), byte(j)}), 8080).String() + "/TCP")
	}
	return out
}

func declareFull(a *agent, txn statedb.WriteTxn, i, k int) error {
	return upsert(a.w, txn, fmt.Sprintf("full-%d", i), fullVIP(i), lb.AlgorithmRandom, false, fullBackends(i, k)...)
}

// served returns the frontends whose reconciliation is done and those
// that failed, by address, with the failures' errors.
func (a *agent) statuses() (done []string, failed map[string]string) {
	failed = map[string]string{}
	for fe := range a.frontends.All(a.db.ReadTxn()) {
		switch fe.Status.Kind {
		case statedbreconciler.StatusKindDone:
			done = append(done, fe.Address.String())
		case statedbreconciler.StatusKindError:
			failed[fe.Address.String()] = fe.Status.GetError()
		}
	}
	slices.Sort(done)
	return done, failed
}

// waitServed waits until exactly the services in want (by index) are
// reconciled and every other one has failed, and the maps are consistent.
func (a *agent) waitServed(t *testing.T, maps *bpf.Maps, want []int, all []int) {
	t.Helper()
	var wantDone []string
	for _, i := range want {
		wantDone = append(wantDone, fullVIP(i))
	}
	slices.Sort(wantDone)
	deadline := time.Now().Add(20 * time.Second)
	for {
		done, failed := a.statuses()
		if slices.Equal(done, wantDone) && len(done)+len(failed) == len(all) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("served %v, failed %v; want served %v\n%s", done, failed, wantDone, dumpText(t, maps))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if v := checkMaps(maps); v != "" {
		t.Fatalf("%s\n%s", v, dumpText(t, maps))
	}
	d, err := bpf.TakeDump(maps)
	if err != nil {
		t.Fatal(err)
	}
	masters := map[string]bool{}
	for _, e := range d.Services {
		if e.Slot == 0 {
			masters[e.Frontend.String()] = true
		}
	}
	for _, vip := range wantDone {
		if !masters[vip] {
			t.Errorf("%s is reconciled but has no master entry", vip)
		}
	}
	if len(masters) != len(wantDone) {
		t.Errorf("%d master entries, want %d:\n%s", len(masters), len(wantDone), dumpText(t, maps))
	}
}

// When more frontends are declared than a map has room for, the oldest
// that fit are served, and the others hold no entry. As room frees, the
// waiting frontends get it, oldest first, before a newer one. (Once, the
// frontends that did not fit kept the slots and backends they had written,
// every frontend stayed in error, and nothing was served.)
func TestFullMapServesTheFrontendsThatFit(t *testing.T) {
	for _, c := range roomCases {
		t.Run(c.name, func(t *testing.T) {
			cfg := smallMapsConfig()
			c.size(&cfg)
			onBothMapKindsWith(t, cfg, func(t *testing.T, maps *bpf.Maps) {
				// statedb's retries wait for good: the waiting frontends
				// are retried when the reconciler asks for it, as room
				// frees.
				defer reconciler.SetRetryMinBackoff(time.Hour)()
				a := newAgent(t, maps, func(c *reconciler.Config) { c.LBRetryMaxBackoff = time.Hour })
				a.start(t)
				defer a.stop(t)
				all := []int{0, 1, 2, 3, 4, 5, 6}
				a.write(t, func(txn statedb.WriteTxn) error {
					for _, i := range all {
						if err := declareFull(a, txn, i, c.k); err != nil {
							return err
						}
					}
					return nil
				})
				want := all[:c.fit]
				a.waitServed(t, maps, want, all)
				_, failed := a.statuses()
				for vip, err := range failed {
					if !strings.Contains(err, c.name) || !strings.Contains(err, c.flag) {
						t.Errorf("%s: error %q names neither %s nor %s", vip, err, c.name, c.flag)
					}
				}
				metrics := a.scrape(t)
				for _, want := range []string{
					fmt.Sprintf(`lbstate_map_entries{map="%s"} %d`, c.name, c.fit*c.per),
					fmt.Sprintf(`lbstate_map_capacity{map="%s"} %d`, c.name, c.fit*c.per),
					fmt.Sprintf(`lbstate_map_pressure{map="%s"} 1`, c.name),
				} {
					if !strings.Contains(metrics, want+"\n") {
						t.Errorf("metrics lack %q", want)
					}
				}
				if !strings.Contains(metrics, fmt.Sprintf(`lbstate_map_full_total{map="%s"} `, c.name)) ||
					strings.Contains(metrics, fmt.Sprintf(`lbstate_map_full_total{map="%s"} 0\n`, c.name)) {
					t.Errorf("no frontend counted as refused for want of room in %s", c.name)
				}

				// Two served services go, and a new one comes at once: the
				// two oldest waiting get the room, not the new one.
				a.write(t, func(txn statedb.WriteTxn) error {
					for _, i := range want[:2] {
						if err := a.w.DeleteService(txn, lb.NewServiceName("test", fmt.Sprintf("full-%d", i)), lb.SourceK8s); err != nil {
							return err
						}
					}
					return declareFull(a, txn, 7, c.k)
				})
				all = append(all[2:], 7)
				want = all[:c.fit]
				a.waitServed(t, maps, want, all)

				// One more goes: the next oldest comes in.
				a.write(t, func(txn statedb.WriteTxn) error {
					return a.w.DeleteService(txn, lb.NewServiceName("test", fmt.Sprintf("full-%d", all[0])), lb.SourceK8s)
				})
				all = all[1:]
				want = all[:c.fit]
				a.waitServed(t, maps, want, all)
			})
		})
	}
}

// fullServices makes lb_services' BatchUpdate, while armed, write the
// first entry and then fail as a full map does: what the kernel says when
// someone else filled the map behind the reconciler's back.
type fullServices struct {
	bpf.Map[bpf.ServiceKey, bpf.ServiceValue]
	armed atomic.Bool
	fired atomic.Int32
}

func (f *fullServices) BatchUpdate(ks []bpf.ServiceKey, vs []bpf.ServiceValue) error {
	if f.armed.Load() && len(ks) > 1 {
		f.fired.Add(1)
		if err := f.Map.Update(ks[0], vs[0]); err != nil {
			return err
		}
		return &bpf.MapFullError{Map: f.Name(), Op: "batch update", MaxEntries: 1}
	}
	return f.Map.BatchUpdate(ks, vs)
}

// entriesOf returns the dump's lines that mention any of names.
func entriesOf(dump string, names ...string) []string {
	var out []string
	for _, line := range splitLines(dump) {
		for _, n := range names {
			if strings.Contains(line, n) {
				out = append(out, line)
				break
			}
		}
	}
	return out
}

// A frontend not yet in service that the kernel finds no room for takes
// back everything it wrote (slots, Maglev table, the backends only it
// uses), and is served once room frees; one in service that cannot grow
// stays in service as it was.
func TestFrontendFoundNoRoomTakesBackWhatItWrote(t *testing.T) {
	onBothMapKinds(t, func(t *testing.T, raw *bpf.Maps, _ func() *bpf.Maps) {
		maps := *raw
		full := &fullServices{Map: raw.Services}
		maps.Services = full
		defer reconciler.SetRetryMinBackoff(time.Hour)()
		a := newAgent(t, &maps, func(c *reconciler.Config) { c.LBRetryMaxBackoff = time.Hour })
		a.start(t)
		defer a.stop(t)
		a.write(t, func(txn statedb.WriteTxn) error {
			if err := upsert(a.w, txn, "old", "10.96.11.1:80/TCP", lb.AlgorithmRandom, false, be("10.11.0.1:8080/TCP")); err != nil {
				return err
			}
			return upsert(a.w, txn, "gone", "10.96.11.3:80/TCP", lb.AlgorithmRandom, false, be("10.11.2.1:8080/TCP"))
		})
		a.waitDone(t, 10*time.Second)
		before := dumpText(t, raw)

		full.armed.Store(true)
		a.write(t, func(txn statedb.WriteTxn) error {
			// old grows; new is new; both past the inline slots, so that
			// the batch the kernel refuses is of slot entries.
			var grown, fresh []lb.BackendParams
			for i := range bpf.InlineSlots + 2 {
				grown = append(grown, be(fmt.Sprintf("10.11.0.%d:8080/TCP", i+1)))
			}
			for i := range bpf.InlineSlots + 1 {
				fresh = append(fresh, be(fmt.Sprintf("10.11.1.%d:8080/TCP", i+1)))
			}
			if err := upsert(a.w, txn, "old", "10.96.11.1:80/TCP", lb.AlgorithmRandom, false, grown...); err != nil {
				return err
			}
			return upsert(a.w, txn, "new", "10.96.11.2:80/TCP", lb.AlgorithmMaglev, false, fresh...)
		})
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, failed := a.statuses(); len(failed) == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the frontends never failed (%d injected failures)\n%s", full.fired.Load(), dumpText(t, raw))
			}
			time.Sleep(5 * time.Millisecond)
		}
		// Refused by the kernel while the counts said it fits, the new
		// frontend is not retried on the room it took back itself (that
		// would repeat until room frees), only on its backoff (an hour).
		fired := full.fired.Load()
		time.Sleep(100 * time.Millisecond)
		if again := full.fired.Load() - fired; again > 0 {
			t.Errorf("retried %d times with no room freed", again)
		}
		after := dumpText(t, raw)
		if v := checkMaps(raw); v != "" {
			t.Fatalf("%s\n%s", v, after)
		}
		newID := a.frontendID("10.96.11.2:80/TCP")
		if left := entriesOf(after, "10.96.11.2:", "10.11.1.", fmt.Sprintf("maglev %d ", newID)); len(left) > 0 {
			t.Errorf("the new frontend, found no room for, left entries behind:\n%s", strings.Join(left, "\n"))
		}
		if got, want := entriesOf(after, "10.96.11.1:80/TCP master", "10.11.0.1:"), entriesOf(before, "10.96.11.1:80/TCP master", "10.11.0.1:"); !slices.Equal(got, want) {
			t.Errorf("the frontend in service changed:\n--- before\n%s\n--- after\n%s", strings.Join(want, "\n"), strings.Join(got, "\n"))
		}

		// Room frees: both are written.
		full.armed.Store(false)
		a.write(t, func(txn statedb.WriteTxn) error {
			return a.w.DeleteService(txn, lb.NewServiceName("test", "gone"), lb.SourceK8s)
		})
		a.waitDone(t, 10*time.Second)
		if v := checkMaps(raw); v != "" {
			t.Fatalf("%s\n%s", v, dumpText(t, raw))
		}
	})
}

// frontendID returns the ID the reconciler gave the frontend at vip.
func (a *agent) frontendID(vip string) uint32 {
	fe, _, _ := a.frontends.Get(a.db.ReadTxn(), tables.FrontendByAddress.Query(addr(vip)))
	if fe == nil {
		return 0
	}
	return fe.ID
}

// A frontend in service whose change needs more room than is free stays
// in service as it was, and takes the room when it frees.
func TestFrontendThatCannotGrowStaysInServiceAsItWas(t *testing.T) {
	cfg := smallMapsConfig()
	cfg.LBBackendsMax = 4
	onBothMapKindsWith(t, cfg, func(t *testing.T, maps *bpf.Maps) {
		defer reconciler.SetRetryMinBackoff(time.Hour)()
		a := newAgent(t, maps, func(c *reconciler.Config) { c.LBRetryMaxBackoff = time.Hour })
		a.start(t)
		defer a.stop(t)
		a.write(t, func(txn statedb.WriteTxn) error {
			if err := declareFull(a, txn, 0, 2); err != nil {
				return err
			}
			return declareFull(a, txn, 1, 2)
		})
		a.waitDone(t, 10*time.Second)
		before := dumpText(t, maps)

		a.write(t, func(txn statedb.WriteTxn) error { return declareFull(a, txn, 0, 4) })
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, failed := a.statuses()
			if err, ok := failed[fullVIP(0)]; ok {
				if !strings.Contains(err, "lb_backends") {
					t.Fatalf("error %q does not name lb_backends", err)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the change that does not fit never failed:\n%s", dumpText(t, maps))
			}
			time.Sleep(5 * time.Millisecond)
		}
		if after := dumpText(t, maps); after != before {
			t.Fatalf("the maps changed:\n--- before\n%s--- after\n%s", before, after)
		}

		a.write(t, func(txn statedb.WriteTxn) error {
			return a.w.DeleteService(txn, lb.NewServiceName("test", "full-1"), lb.SourceK8s)
		})
		a.waitServed(t, maps, []int{0}, []int{0})
		if got := len(entriesOf(dumpText(t, maps), fullVIP(0)+" slot=")); got != 4 {
			t.Fatalf("%s has %d slots, want 4:\n%s", fullVIP(0), got, dumpText(t, maps))
		}
	})
}
