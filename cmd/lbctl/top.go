package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// topCmd shows the busiest frontends and backends from the reference
// datapath's counters, refreshing like top.
func topCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("top", "Usage: lbctl top [flags]\n\nShows the busiest frontends and backends, by bytes per second, from the\ncounters the reference datapath keeps in the pinned maps (lb_counters,\nlb_drops; reading them takes the privileges for BPF maps), refreshing\nevery --interval. Service names come from the agent's API when it\nanswers.", stderr)
	pinDir := fs.String("lb-pin-dir", defaultPinDir, "The agent's pinned maps (its --lb-pin-dir)")
	api := fs.String("api", defaultAPI, "The agent's HTTP API, for service names")
	interval := fs.Duration("interval", 2*time.Second, "Time between refreshes")
	iterations := fs.Int("iterations", 0, "Stop after this many screens (0: until interrupted)")
	count := fs.IntP("count", "n", 10, "Rows per table")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *interval <= 0 {
		return fmt.Errorf("--interval %s: want a positive duration", *interval)
	}
	m, err := bpf.OpenPinnedMaps(*pinDir)
	if err != nil {
		return err
	}
	defer m.Close()
	names := serviceNames(*api)
	clear := isTerminal(stdout)
	var prev *topSample
	for i := 0; *iterations == 0 || i < *iterations; i++ {
		if i > 0 {
			time.Sleep(*interval)
		}
		cur, err := takeTopSample(m)
		if err != nil {
			return err
		}
		if clear {
			fmt.Fprint(stdout, "\x1b[H\x1b[2J")
		}
		writeTop(stdout, prev, cur, names, *count)
		prev = cur
	}
	return nil
}

// topSample is the counters at one moment, with the names the maps give.
type topSample struct {
	at       time.Time
	counters map[bpf.CounterKey]bpf.CounterValue
	drops    map[uint32]uint64 // by frontend
	// frontends by rev-NAT ID, backends by ID: their addresses.
	frontends map[uint32]string
	backends  map[uint32]string
}

func takeTopSample(m *bpf.Maps) (*topSample, error) {
	s := &topSample{
		at: time.Now(), counters: map[bpf.CounterKey]bpf.CounterValue{}, drops: map[uint32]uint64{},
		frontends: map[uint32]string{}, backends: map[uint32]string{},
	}
	err := m.Counters.Iterate(func(k bpf.CounterKey, v []bpf.CounterValue) bool {
		s.counters[k] = bpf.SumCounters(v)
		return true
	})
	if err == nil {
		err = m.Drops.Iterate(func(k bpf.DropKey, v []uint64) bool {
			for _, n := range v {
				s.drops[k.RevNatID] += n
			}
			return true
		})
	}
	if err == nil {
		err = m.RevNat.Iterate(func(id uint32, v bpf.RevNatValue) bool {
			s.frontends[id] = v.AddrPort().String()
			return true
		})
	}
	if err == nil {
		err = m.Backends.Iterate(func(id uint32, b bpf.Backend) bool {
			s.backends[id] = b.L3n4Addr().String()
			return true
		})
	}
	return s, err
}

// topRow is one frontend's or backend's traffic: totals, and rates since
// the previous sample.
type topRow struct {
	name, service                   string
	flows, packets, bytes, drops    uint64
	flowRate, packetRate, bytesRate float64
}

// topRows adds up cur's counters by frontend and by backend (of a
// frontend), with rates against prev (none without one).
func topRows(prev, cur *topSample, names map[uint32]string) (frontends, backends []topRow) {
	var secs float64
	if prev != nil {
		secs = cur.at.Sub(prev.at).Seconds()
	}
	fes := map[uint32]*topRow{}
	feRow := func(id uint32) *topRow {
		if r, ok := fes[id]; ok {
			return r
		}
		r := &topRow{name: nameOr(cur.frontends, id, "frontend"), service: names[id]}
		fes[id] = r
		return r
	}
	for _, k := range slices.SortedFunc(maps.Keys(cur.counters), func(a, b bpf.CounterKey) int {
		return cmp.Or(cmp.Compare(a.RevNatID, b.RevNatID), cmp.Compare(a.BackendID, b.BackendID))
	}) {
		v := cur.counters[k]
		var d bpf.CounterValue // since prev; the whole count for a new entry
		if p, ok := prevCounter(prev, k); ok && p.Flows <= v.Flows && p.Packets <= v.Packets && p.Bytes <= v.Bytes {
			d = bpf.CounterValue{Flows: v.Flows - p.Flows, Packets: v.Packets - p.Packets, Bytes: v.Bytes - p.Bytes}
		} else {
			d = v
		}
		b := topRow{
			name:    nameOr(cur.backends, k.BackendID, "backend") + " via " + nameOr(cur.frontends, k.RevNatID, "frontend"),
			service: names[k.RevNatID], flows: v.Flows, packets: v.Packets, bytes: v.Bytes,
		}
		if secs > 0 {
			b.flowRate, b.packetRate, b.bytesRate = float64(d.Flows)/secs, float64(d.Packets)/secs, float64(d.Bytes)/secs
		}
		backends = append(backends, b)
		f := feRow(k.RevNatID)
		f.flows, f.packets, f.bytes = f.flows+b.flows, f.packets+b.packets, f.bytes+b.bytes
		f.flowRate, f.packetRate, f.bytesRate = f.flowRate+b.flowRate, f.packetRate+b.packetRate, f.bytesRate+b.bytesRate
	}
	for id, n := range cur.drops {
		feRow(id).drops = n
	}
	for _, id := range slices.Sorted(maps.Keys(fes)) {
		frontends = append(frontends, *fes[id])
	}
	busiest := func(a, b topRow) int {
		return cmp.Or(cmp.Compare(b.bytesRate, a.bytesRate), cmp.Compare(b.bytes, a.bytes), cmp.Compare(b.drops, a.drops))
	}
	slices.SortStableFunc(frontends, busiest)
	slices.SortStableFunc(backends, busiest)
	return frontends, backends
}

func prevCounter(prev *topSample, k bpf.CounterKey) (bpf.CounterValue, bool) {
	if prev == nil {
		return bpf.CounterValue{}, false
	}
	v, ok := prev.counters[k]
	return v, ok
}

func nameOr(names map[uint32]string, id uint32, kind string) string {
	if n, ok := names[id]; ok {
		return n
	}
	return fmt.Sprintf("%s %d (gone)", kind, id)
}

// writeTop prints the busiest count frontends and backends.
func writeTop(w io.Writer, prev, cur *topSample, names map[uint32]string, count int) {
	frontends, backends := topRows(prev, cur, names)
	rate := func(r float64) string {
		if prev == nil {
			return "-"
		}
		return fmt.Sprintf("%.1f", r)
	}
	fmt.Fprintf(w, "lbstate top - %s - %d frontends, %d backend pairs with traffic\n\n", cur.at.Format(time.TimeOnly), len(frontends), len(backends))
	for _, table := range []struct {
		title string
		rows  []topRow
		drops bool
	}{{"FRONTEND", frontends, true}, {"BACKEND", backends, false}} {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "%s\tSERVICE\tBYTES/s\tPACKETS/s\tFLOWS/s\tBYTES\tPACKETS\tFLOWS\t", table.title)
		if table.drops {
			fmt.Fprint(tw, "DROPS\t")
		}
		fmt.Fprintln(tw)
		for _, r := range table.rows[:min(count, len(table.rows))] {
			svc := cmp.Or(r.service, "-")
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t", r.name, svc, rate(r.bytesRate), rate(r.packetRate), rate(r.flowRate), r.bytes, r.packets, r.flows)
			if table.drops {
				fmt.Fprintf(tw, "%d\t", r.drops)
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
}

// serviceNames returns the agent's services by frontend ID, or none when
// the agent does not answer: top works from the maps alone.
func serviceNames(api string) map[uint32]string {
	names := map[uint32]string{}
	base, err := agentURL(api)
	if err != nil {
		return names
	}
	c := &agentClient{base: base, timeout: 2 * time.Second}
	eachRow(c, tables.FrontendsTableName, func(fe *lb.Frontend) error {
		if fe.ID != 0 {
			names[fe.ID] = fe.Service.String()
		}
		return nil
	})
	return names
}

// isTerminal says whether w is a terminal, which top clears between
// screens.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
