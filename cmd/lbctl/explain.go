package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// explain walks the maps the way a datapath does for a flow to FRONTEND
// and says which backends it can reach, and why.
func explain(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("explain", "Usage: lbctl explain FRONTEND [--src ADDR:PORT] [flags]\n\nWalks an agent's maps as a datapath does for a new flow to FRONTEND\n(e.g. 10.96.0.10:80/TCP) and prints the backends it can reach. The maps\nare the pinned ones when --lb-pin-dir has them, else the dump the agent\nserves under --api, or with -f those of a directory of manifests.", stderr)
	src := fs.String("src", "", "The client ADDR:PORT, to decide source ranges, affinity and the Maglev slot")
	agent := addSourceFlags(fs)
	offline := addPipelineFlags(fs, "Explain offline, for a directory of Kubernetes manifests (as lbctl simulate)", " (with -f)")
	positional, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(positional) != 1 {
		fs.Usage()
		return errors.New("give one FRONTEND, e.g. 10.96.0.10:80/TCP (lbctl frontends lists them)")
	}
	fe, err := lb.ParseL3n4Addr(positional[0])
	if err != nil {
		return fmt.Errorf("%w: give a FRONTEND such as 10.96.0.10:80/TCP", err)
	}
	var client *netip.AddrPort
	if *src != "" {
		ap, err := netip.ParseAddrPort(*src)
		if err != nil {
			return fmt.Errorf("--src %q: want the client's ADDR:PORT, such as 192.0.2.1:40000", *src)
		}
		client = &ap
	}
	listHint := "lbctl maps lists the frontends the maps have"
	var m *bpf.Maps
	if offline.given() {
		if fs.Changed("lb-pin-dir") || fs.Changed("api") {
			return errors.New("-f explains offline: drop --lb-pin-dir and --api, or drop -f")
		}
		if fs.Changed("dump") {
			return errors.New("-f explains manifests, --dump an agent's archive: give one")
		}
		p, err := offline.start(stderr)
		if err != nil {
			return err
		}
		defer p.stop()
		m = p.maps
		listHint = "lbctl simulate -f " + offline.dir + " lists them"
	} else {
		if err := offline.unused(); err != nil {
			return err
		}
		if m, err = agent.mapsFor(fe); err != nil {
			return err
		}
		defer m.Close()
	}
	err = explainFlow(stdout, m, fe, client)
	if errors.Is(err, errNoServiceEntry) {
		return fmt.Errorf("%w (%s)", err, listHint)
	}
	return err
}

// errNoServiceEntry is returned for a frontend the maps do not have.
var errNoServiceEntry = errors.New("the datapath does not balance it")

// backendLookup looks backends up by ID as explain names them, once
// each: reading a few entries beats reading all of lb_backends, an array
// of --lb-backends-max slots. It keeps the first error.
type backendLookup struct {
	m    bpf.Map[uint32, bpf.Backend]
	seen map[uint32]bpf.Backend
	err  error
}

func (l *backendLookup) get(id uint32) (bpf.Backend, bool) {
	if b, ok := l.seen[id]; ok {
		return b, true
	}
	b, ok, err := l.m.Lookup(id)
	if err != nil && l.err == nil {
		l.err = err
	}
	if ok {
		l.seen[id] = b
	}
	return b, ok
}

func explainFlow(w io.Writer, m *bpf.Maps, fe lb.L3n4Addr, client *netip.AddrPort) (err error) {
	master, ok, err := m.Services.Lookup(bpf.NewServiceKey(fe, 0))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("no service entry for %s: %w", fe, errNoServiceEntry)
	}
	backends := &backendLookup{m: m.Backends, seen: map[uint32]bpf.Backend{}}
	defer func() {
		if err == nil {
			err = backends.err
		}
	}()
	name := func(id uint32) string {
		if id == bpf.BackendReject {
			return "reject (a route's share that does not resolve: new flows are refused)"
		}
		if b, ok := backends.get(id); ok {
			if b.ClusterID != 0 { // another cluster's
				return fmt.Sprintf("backend %d %s (%s, cluster %d)", id, b.L3n4Addr(), lb.BackendState(b.State), b.ClusterID)
			}
			return fmt.Sprintf("backend %d %s (%s)", id, b.L3n4Addr(), lb.BackendState(b.State))
		}
		return fmt.Sprintf("backend %d: MISSING from lb_backends", id)
	}
	fmt.Fprintf(w, "frontend %s: rev-NAT ID %d, %s, algorithm %s, %d slots taking new flows, %d standby\n",
		fe, master.RevNatID, lb.SVCType(master.Type), master.AlgorithmName(), master.Count, master.Standby)
	if flags := master.FlagNames(); len(flags) > 0 {
		fmt.Fprintf(w, "  flags: %s\n", strings.Join(flags, ", "))
	}
	if twin := fe.WithScope(lb.ScopeInternal); fe.Scope() == lb.ScopeExternal {
		if _, ok, _ := m.Services.Lookup(bpf.NewServiceKey(twin, 0)); ok {
			fmt.Fprintf(w, "  clients inside the cluster use %s (explain that for them)\n", twin)
		}
	}

	if master.Flags&bpf.FlagSourceRanges != 0 {
		if client == nil {
			fmt.Fprintln(w, "source ranges: restricted; give --src to check a client")
		} else {
			bits := 128
			if client.Addr().Unmap().Is4() {
				bits = 32
			}
			_, allowed, err := m.SourceRanges.Lookup(bpf.NewSourceRangeKey(master.RevNatID, netip.PrefixFrom(client.Addr().Unmap(), bits)))
			if err != nil {
				return err
			}
			if !allowed {
				fmt.Fprintf(w, "source ranges: %s is not in any range: DROPPED\n", client.Addr())
				return nil
			}
			fmt.Fprintf(w, "source ranges: %s is allowed\n", client.Addr())
		}
	}
	if master.Flags&bpf.FlagProxy != 0 {
		fmt.Fprintf(w, "proxy: new flows go to the L7 proxy on this node, port %d at the loopback address; its %d slots are the proxy's to balance over\n",
			binary.BigEndian.Uint16(master.ProxyPort[:]), master.Count)
		return nil
	}
	if master.Flags&bpf.FlagSkipFromBackend != 0 {
		done, err := explainSkip(w, m, fe, master, client, backends, name)
		if done || err != nil {
			return err
		}
	}
	slots := make([]uint32, 0, int(master.Count)+int(master.Standby))
	for slot := 1; slot <= int(master.Count)+int(master.Standby); slot++ {
		id, ok, err := bpf.SlotBackend(m.Services, fe, master, slot)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("slot %d of %s is missing: the maps are inconsistent", slot, fe)
		}
		slots = append(slots, id)
	}
	rotation, standby := slots[:master.Count], slots[master.Count:]
	if master.Flags&bpf.FlagAffinity != 0 && client != nil {
		v, ok, err := m.Affinity.Lookup(bpf.AffinityKey{Client: client.Addr().Unmap().As16(), RevNatID: master.RevNatID})
		if err != nil {
			return err
		}
		switch b, alive := backends.get(v.BackendID); {
		case !ok:
			fmt.Fprintf(w, "affinity: %s is not pinned yet; the backend picked below will be pinned for %ds\n", client.Addr(), master.AffinityTimeout)
		case !alive || b.State != uint8(lb.BackendActive) || !slices.Contains(rotation, v.BackendID):
			// The datapath's rule (lb.h): a pin holds only while its
			// backend is in a slot that takes new flows.
			fmt.Fprintf(w, "affinity: %s's pin to backend %d is void (it takes no new flows of this frontend); the backend picked below replaces it\n", client.Addr(), v.BackendID)
		case monotonicSeconds()-v.LastUsed > uint32(master.AffinityTimeout):
			fmt.Fprintf(w, "affinity: %s's pin to %s expired; the backend picked below replaces it, for %ds\n", client.Addr(), name(v.BackendID), master.AffinityTimeout)
		default:
			fmt.Fprintf(w, "affinity: %s is pinned (for %ds) to %s\n", client.Addr(), master.AffinityTimeout, name(v.BackendID))
			return nil
		}
	}
	if master.Count == 0 {
		fmt.Fprintln(w, "no backend takes new flows: new connections are refused")
	}

	switch {
	case master.Count == 0:
		// Nothing takes new flows (said above).
	case master.Algorithm == bpf.AlgorithmMaglev:
		table, ok, err := m.Maglev.Lookup(master.RevNatID)
		if err != nil {
			return err
		}
		if !ok && master.Count > 0 {
			return fmt.Errorf("no Maglev table for rev-NAT ID %d: the maps are inconsistent", master.RevNatID)
		}
		if client != nil && ok {
			// The reference datapath's choice: include/lb.h's flow hash,
			// keyed by the node's seed.
			seed, err := m.Seed()
			if err != nil {
				return err
			}
			slot := seed.FlowHash(*client, fe) % uint32(len(table))
			to := name(table[slot])
			if table[slot] == bpf.BackendReject {
				to += ": REJECTED"
			}
			fmt.Fprintf(w, "maglev: flow %s -> %s hashes to slot %d of %d: %s\n", client, fe, slot, len(table), to)
			break
		}
		fmt.Fprintf(w, "maglev: a flow takes the backend of its hash's slot among %d (give --src for one flow):\n", len(table))
		printShares(w, table, name)
	default:
		fmt.Fprintf(w, "random: a new flow takes a random slot of %d:\n", len(rotation))
		printShares(w, rotation, name)
	}
	for _, id := range standby {
		fmt.Fprintf(w, "standby (existing flows only): %s\n", name(id))
	}
	return nil
}

// explainSkip explains a redirect with skip-from-backend: a client that is
// one of the redirect's backends takes a random fallback slot (done is
// then true).
func explainSkip(w io.Writer, m *bpf.Maps, fe lb.L3n4Addr, master bpf.ServiceValue, client *netip.AddrPort,
	backends *backendLookup, name func(uint32) string) (done bool, err error) {
	slot := func(i int) (uint32, error) {
		id, ok, err := bpf.SlotBackend(m.Services, fe, master, i)
		if err == nil && !ok {
			err = fmt.Errorf("slot %d of %s is missing: the maps are inconsistent", i, fe)
		}
		return id, err
	}
	first := int(master.Count) + int(master.Standby)
	var fallback []uint32
	for i := first + 1; i <= first+int(master.Fallback); i++ {
		id, err := slot(i)
		if err != nil {
			return false, err
		}
		fallback = append(fallback, id)
	}
	if client == nil {
		fmt.Fprintf(w, "skip-from-backend: a flow from one of the redirect's backends takes a random one of %d fallback slots (give --src for one flow)\n", len(fallback))
		printShares(w, fallback, name)
		return false, nil
	}
	for i := 1; i <= first; i++ {
		id, err := slot(i)
		if err != nil {
			return false, err
		}
		if b, ok := backends.get(id); ok && netip.AddrFrom16(b.Addr).Unmap() == client.Addr().Unmap() {
			if len(fallback) == 0 {
				fmt.Fprintf(w, "skip-from-backend: %s is the redirect's %s and no fallback slot takes new flows: DROPPED\n", client.Addr(), name(id))
				return true, nil
			}
			fmt.Fprintf(w, "skip-from-backend: %s is the redirect's %s: a random fallback slot of %d (the service's own backends):\n", client.Addr(), name(id), len(fallback))
			printShares(w, fallback, name)
			return true, nil
		}
	}
	fmt.Fprintf(w, "skip-from-backend: %s is none of the redirect's backends: redirected\n", client.Addr())
	return false, nil
}

// printShares prints each backend's share of the slots.
func printShares(w io.Writer, slots []uint32, name func(uint32) string) {
	counts := map[uint32]int{}
	for _, id := range slots {
		counts[id]++
	}
	for _, id := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(w, "  %s: %d of %d slots (%.1f%%)\n", name(id), counts[id], len(slots), 100*float64(counts[id])/float64(len(slots)))
	}
}

// monotonicSeconds is the datapath's clock, which lb_affinity's last-used
// times are in. lbctl runs on the agent's host, so the clocks are one.
func monotonicSeconds() uint32 { return bpf.MonotonicSeconds() }
