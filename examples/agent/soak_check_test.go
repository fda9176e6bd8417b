package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/statedb"
	statedbreconciler "github.com/cilium/statedb/reconciler"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// agentView is what the soak test sees of a running agent: its tables and
// its kernel maps, taken from its hive.
type agentView struct {
	db        *statedb.DB
	frontends statedb.Table[*lb.Frontend]
	backends  statedb.Table[*lb.Backend]
	maps      *bpf.Maps
}

// slotsNameBackends reads the maps as a datapath does, while they
// change, and reports a slot naming a backend that lb_backends lacks, if
// it can prove one: the backend missing before and after the slot is
// read again (an iteration of a kernel map that changes may skip keys,
// and a backend ID may come back).
func slotsNameBackends(m *bpf.Maps) string {
	type slotRef struct {
		key bpf.ServiceKey
		id  uint32
	}
	var slots []slotRef
	m.Services.Iterate(func(k bpf.ServiceKey, v bpf.ServiceValue) bool {
		if k.Slot > 0 {
			slots = append(slots, slotRef{k, v.BackendID})
		}
		return true
	})
	missing := func(id uint32) bool {
		_, ok, _ := m.Backends.Lookup(id)
		return !ok
	}
	for _, s := range slots {
		if !missing(s.id) {
			continue
		}
		if v, ok, _ := m.Services.Lookup(s.key); ok && v.BackendID == s.id && missing(s.id) {
			return fmt.Sprintf("slot %d of %s names backend %d, which is not in lb_backends", s.key.Slot, s.key.L3n4Addr(), s.id)
		}
	}
	return ""
}

// agree reports how the agent's tables and maps disagree, "" when they
// do not: every frontend is Done, with a master entry counting a slot per
// backend, each slot naming one of its own backends present in
// lb_backends, and a rev-NAT entry under its ID; no master is in the maps
// without a frontend. A frontend that changed while the maps were read
// is left for the next call, so a disagreement is never a race of the
// check's own.
func (v *agentView) agree() string {
	before := v.db.ReadTxn()
	d, err := bpf.TakeDump(v.maps)
	if err != nil {
		return err.Error()
	}
	after := v.db.ReadTxn()
	if s := slotsNameBackends(v.maps); s != "" {
		return s
	}
	masters := map[lb.L3n4Addr]bpf.ServiceEntry{}
	slots := map[lb.L3n4Addr][]uint32{}
	for _, e := range d.Services {
		if e.Slot == 0 {
			masters[e.Frontend] = e
		} else {
			slots[e.Frontend] = append(slots[e.Frontend], e.BackendID)
		}
	}
	backendAt := map[uint32]lb.L3n4Addr{}
	for _, e := range d.Backends {
		backendAt[e.ID] = e.L3n4Addr()
	}
	revNat := map[uint32]bool{}
	for _, e := range d.RevNat {
		revNat[e.ID] = true
	}
	stable, all := 0, 0
	for fe := range v.frontends.All(before) {
		all++
		if now, _, ok := v.frontends.Get(after, frontendByAddr(fe.Address)); !ok || now != fe {
			continue // changed meanwhile
		}
		stable++
		if fe.Status.Kind != statedbreconciler.StatusKindDone {
			return fmt.Sprintf("%s is %s: %s", fe.Address, fe.Status.Kind, fe.Status.GetError())
		}
		m, ok := masters[fe.Address]
		switch {
		case !ok:
			return fmt.Sprintf("%s is Done but has no master entry", fe.Address)
		case int(m.Count)+int(m.Standby) != len(fe.Backends) || len(slots[fe.Address]) != len(fe.Backends):
			return fmt.Sprintf("%s is Done with %d backends, but its master counts %d+%d slots and %d exist",
				fe.Address, len(fe.Backends), m.Count, m.Standby, len(slots[fe.Address]))
		case m.RevNatID != fe.ID || !revNat[fe.ID]:
			return fmt.Sprintf("%s is Done with ID %d, but its master names rev-NAT %d (in lb_rev_nat: %v)", fe.Address, fe.ID, m.RevNatID, revNat[fe.ID])
		}
		for _, id := range slots[fe.Address] {
			a, ok := backendAt[id]
			if !ok || !slices.ContainsFunc(fe.Backends, func(b lb.BackendRef) bool { return b.Address == a }) {
				return fmt.Sprintf("%s is Done, but a slot names backend %d (%s, in lb_backends: %v), not one of its own", fe.Address, id, a, ok)
			}
		}
	}
	if stable == 0 && all > 0 {
		// Nothing judged is no agreement: a restarted agent's
		// frontends, all rewritten while the maps were read, once
		// passed so.
		return fmt.Sprintf("all %d frontends changed while the maps were read", all)
	}
	for a := range masters {
		_, _, was := v.frontends.Get(before, frontendByAddr(a))
		_, _, is := v.frontends.Get(after, frontendByAddr(a))
		if !was && !is {
			return fmt.Sprintf("%s is in the maps, not in the frontends table", a)
		}
	}
	return ""
}

// backendsOf is the addresses of the frontend's backends taking new
// flows, "ip:port", sorted; nil if there is no such frontend.
func (v *agentView) backendsOf(vip string) []string {
	fe, _, ok := v.frontends.Get(v.db.ReadTxn(), frontendByAddr(lb.MustParseL3n4Addr(vip)))
	if !ok {
		return nil
	}
	out := []string{}
	for _, b := range fe.Backends {
		out = append(out, b.Address.AddrPort().String())
	}
	slices.Sort(out)
	return out
}

// unhealthy says whether the backend at addr ("ip:port") is judged so.
func (v *agentView) unhealthy(addr string) bool {
	for b := range v.backends.All(v.db.ReadTxn()) {
		if b.Address.AddrPort().String() == addr {
			return b.Unhealthy
		}
	}
	return false
}

// procStatus returns a field of /proc/self/status in bytes (VmRSS,
// VmHWM).
func procStatus(t *testing.T, field string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	must(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			must(t, err)
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// openHostileFiles lists the process's open files among paths (the
// FIFOs and /dev/zero): the agent refuses them without keeping one open.
func openHostileFiles(t *testing.T, paths []string) []string {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	must(t, err)
	targets := map[string]bool{"/dev/zero": true}
	for _, p := range paths {
		targets[p] = true
	}
	var open []string
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && targets[target] {
			open = append(open, target)
		}
	}
	return open
}

// mounted says whether a mount point at or under dir is in the process's
// mount table.
func mounted(t *testing.T, dir string) bool {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	must(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			return true
		}
	}
	return false
}

func frontendByAddr(a lb.L3n4Addr) statedb.Query[*lb.Frontend] {
	return tables.FrontendByAddress.Query(a)
}

// heapPeak samples the heap's objects (live and not yet collected) every
// 10ms, keeping the highest since its last reset: a probe reading a
// 100 MB body or endless headers would show there, between two rounds'
// checks at rest, also under -race, where RSS says nothing.
type heapPeak struct {
	peak atomic.Uint64
	stop func()
}

func watchHeap() *heapPeak {
	h := &heapPeak{}
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	h.stop = bpftest.KeepChecking(func() {
		metrics.Read(sample)
		v := sample[0].Value.Uint64()
		for {
			old := h.peak.Load()
			if v <= old || h.peak.CompareAndSwap(old, v) {
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
	})
	return h
}

// take returns the peak and starts over.
func (h *heapPeak) take() int64 { return int64(h.peak.Swap(0)) }
