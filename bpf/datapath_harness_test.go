package bpf_test

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// What the tc programs answer, as in linux/pkt_cls.h.
const (
	actOK   = 0
	actShot = 2
)

// dpHarness is the reference datapath loaded over kernel maps of a test's
// own, which the test writes directly, as the reconciler would.
type dpHarness struct {
	t    testing.TB
	maps *bpf.Maps
	dp   *bpf.Datapath
}

func newDatapath(t testing.TB, cfg bpf.Config) *dpHarness {
	t.Helper()
	return newDatapathOptions(t, cfg, bpf.DefaultDatapathOptions)
}

// newDatapathOptions is newDatapath with the datapath's options.
func newDatapathOptions(t testing.TB, cfg bpf.Config, opts bpf.DatapathOptions) *dpHarness {
	t.Helper()
	if cfg.LBPinDir == bpf.DefaultConfig.LBPinDir {
		cfg.LBPinDir = bpftest.Config(t).LBPinDir
	}
	maps := bpftest.KernelMaps(t, cfg)
	d, err := bpf.LoadDatapathOptions(maps, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return &dpHarness{t: t, maps: maps, dp: d}
}

// dpConfig has a Maglev table of 251 slots.
func dpConfig() bpf.Config {
	cfg := bpf.DefaultConfig
	cfg.LBMaglevTableSize = 251
	return cfg
}

func (h *dpHarness) backend(id uint32, addr string, state lb.BackendState) {
	h.t.Helper()
	ref := lb.BackendRef{Address: lb.MustParseL3n4Addr(addr), State: state}
	if err := h.maps.Backends.Update(id, bpf.NewBackend(ref, 0)); err != nil {
		h.t.Fatal(err)
	}
}

// testFrontend is one frontend's entries, as the reconciler writes them.
type testFrontend struct {
	addr     string
	typ      lb.SVCType
	id       uint32
	maglev   bool
	affinity uint32 // the timeout in seconds; 0 for none
	ranges   []string
	slots    []uint32 // backend IDs taking new flows, one per slot
	standby  []uint32
	// Overrides: redirected (with skip, a redirect's skipRedirectFromBackend,
	// whose fallback slots hold the service's own backends), and the L7
	// proxy's port.
	redirected, skip bool
	fallback         []uint32
	proxy            uint16
	// table, with maglev, is the lookup table; nil repeats slots.
	table []uint32
}

func (h *dpHarness) frontend(f testFrontend) {
	h.t.Helper()
	fe := lb.MustParseL3n4Addr(f.addr)
	typ := f.typ
	if typ == 0 {
		typ = lb.SVCTypeClusterIP
	}
	master := bpf.ServiceValue{RevNatID: f.id, ServiceMaster: bpf.ServiceMaster{
		Count: uint16(len(f.slots)), Standby: uint16(len(f.standby)),
		Type: uint8(typ), Algorithm: bpf.AlgorithmRandom, AffinityTimeout: f.affinity,
	}}
	if f.maglev {
		master.Algorithm = bpf.AlgorithmMaglev
		table := f.table
		if table == nil && len(f.slots) > 0 {
			table = make([]uint32, h.maps.Maglev.TableSize())
			for i := range table {
				table[i] = f.slots[i%len(f.slots)]
			}
		}
		if table != nil {
			h.check(h.maps.Maglev.Update(f.id, table))
		}
	}
	if f.affinity > 0 {
		master.Flags |= bpf.FlagAffinity
	}
	if f.redirected {
		master.Flags |= bpf.FlagRedirected
	}
	if f.skip {
		master.Flags |= bpf.FlagSkipFromBackend
		master.Fallback = uint16(len(f.fallback))
	}
	if f.proxy != 0 {
		master.Flags |= bpf.FlagProxy
		binary.BigEndian.PutUint16(master.ProxyPort[:], f.proxy)
	}
	for _, r := range f.ranges {
		master.Flags |= bpf.FlagSourceRanges
		h.check(h.maps.SourceRanges.Update(bpf.NewSourceRangeKey(f.id, netip.MustParsePrefix(r)), 1))
	}
	h.check(bpf.WriteService(h.maps.Services, fe, master, slices.Concat(f.slots, f.standby, f.fallback)))
	h.check(h.maps.RevNat.Update(f.id, bpf.NewRevNatValue(fe)))
}

func (h *dpHarness) check(err error) {
	h.t.Helper()
	if err != nil {
		h.t.Fatal(err)
	}
}

// run runs a program of the datapath on one packet.
func (h *dpHarness) run(prog string, pkt []byte) (uint32, []byte) {
	h.t.Helper()
	p := h.dp.Program(prog)
	if p == nil {
		h.t.Fatalf("no program %s", prog)
	}
	out := make([]byte, len(pkt)+256)
	opts := &ebpf.RunOptions{Data: pkt, DataOut: out, Repeat: 1}
	verdict, err := p.Run(opts)
	if err != nil {
		h.t.Fatalf("%s: %v", prog, err)
	}
	return verdict, opts.DataOut
}

// send runs prog on a packet of f and returns its verdict and the packet's
// tuple after, checking its checksums.
func (h *dpHarness) send(prog string, f tuple) (uint32, tuple) {
	h.t.Helper()
	verdict, out := h.run(prog, packet(h.t, f, 32))
	return verdict, decode(h.t, out)
}

// balance sends a packet of f through lb_tc_ingress, which must let it
// pass, and returns where it goes.
func (h *dpHarness) balance(f tuple) tuple {
	h.t.Helper()
	verdict, out := h.send("lb_tc_ingress", f)
	if verdict != actOK {
		h.t.Fatalf("%v: verdict %d, want it passed", f, verdict)
	}
	return out
}

// counter returns the lb_counters entry of a frontend and backend, summed
// over CPUs.
func (h *dpHarness) counter(revNatID, backendID uint32) bpf.CounterValue {
	h.t.Helper()
	v, _, err := h.maps.Counters.Lookup(bpf.CounterKey{RevNatID: revNatID, BackendID: backendID})
	h.check(err)
	return bpf.SumCounters(v)
}

// drops returns how many packets to a frontend were dropped for reason.
func (h *dpHarness) drops(revNatID, reason uint32) uint64 {
	h.t.Helper()
	v, _, err := h.maps.Drops.Lookup(bpf.DropKey{RevNatID: revNatID, Reason: reason})
	h.check(err)
	var n uint64
	for _, c := range v {
		n += c
	}
	return n
}

// backendAt returns the ID of the backend whose address is a.
func (h *dpHarness) backendAt(a netip.AddrPort) uint32 {
	h.t.Helper()
	var found uint32
	h.check(h.maps.Backends.Iterate(func(id uint32, b bpf.Backend) bool {
		if ap := b.L3n4Addr().AddrPort(); netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()) == a {
			found = id
			return false
		}
		return true
	}))
	if found == 0 {
		h.t.Fatalf("no backend at %s", a)
	}
	return found
}

// monotonicSeconds is the datapath's clock, read as the agent reads it
// (bpf.MonotonicSeconds: the coarse clock, bpf_ktime_get_coarse_ns).
func monotonicSeconds(testing.TB) uint32 { return bpf.MonotonicSeconds() }

// runIn runs a program on one packet from any goroutine, for tests that
// run it inside a network namespace.
func (h *dpHarness) runIn(prog string, pkt []byte) (uint32, []byte, error) {
	out := make([]byte, len(pkt)+256)
	opts := &ebpf.RunOptions{Data: pkt, DataOut: out, Repeat: 1}
	verdict, err := h.dp.Program(prog).Run(opts)
	return verdict, opts.DataOut, err
}

// runInNetns runs a program on one packet of f inside ns, with
// forwarding off there, and decodes the packet it leaves.
func (h *dpHarness) runInNetns(ns *bpftest.Netns, prog string, f tuple) (uint32, tuple) {
	h.t.Helper()
	var (
		verdict uint32
		out     []byte
	)
	if err := ns.Do(func() (err error) {
		if err := setForwarding(false); err != nil {
			return err
		}
		verdict, out, err = h.runIn(prog, packet(h.t, f, 32))
		return err
	}); err != nil {
		h.t.Fatal(err)
	}
	return verdict, decode(h.t, out)
}

// Short names for bpftest's packets.
type tuple = bpftest.Flow

var (
	flow   = bpftest.NewFlow
	packet = bpftest.Packet
	decode = bpftest.Decode
)

// dnsFrontendOfEight gives h the frontend 10.96.0.10:53/UDP (ID 1)
// balancing over eight active backends, 10.1.0.1-8:53 (IDs 1-8).
func (h *dpHarness) dnsFrontendOfEight() {
	var slots []uint32
	for i := uint32(1); i <= 8; i++ {
		h.backend(i, fmt.Sprintf("10.1.0.%d:53/UDP", i), lb.BackendActive)
		slots = append(slots, i)
	}
	h.frontend(testFrontend{addr: "10.96.0.10:53/UDP", id: 1, slots: slots})
}
