package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/lbstate/lbstate"
	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors/file"
	"github.com/lbstate/lbstate/reflectors/kubeapi"
	"github.com/lbstate/lbstate/tables"
)

// kernelPipeline is startPipeline over kernel maps with the reference
// datapath loaded, for dir's manifests (none when dir is empty), and a
// function that waits until the maps hold the tables.
func kernelPipeline(t *testing.T, dir string) (*pipeline, *bpf.Datapath, func()) {
	t.Helper()
	bpftest.Require(t)
	pinDir := bpftest.Config(t).LBPinDir
	p := &pipeline{}
	var rec reconciler.Reconciler[*lb.Frontend]
	h := hive.New(
		lbstate.Cell, // every source idle but the manifests directory
		cell.Invoke(func(d *statedb.DB, wr *tables.Writer, fes statedb.Table[*lb.Frontend], r reconciler.Reconciler[*lb.Frontend], m *bpf.Maps) {
			p.db, p.w, p.frontends, rec, p.maps = d, wr, fes, r, m
		}),
	)
	hive.AddConfigOverride(h, func(c *bpf.ModeConfig) { c.LBMaps = "kernel" })
	hive.AddConfigOverride(h, func(c *bpf.Config) { c.LBPinDir, c.LBMaglevTableSize = pinDir, 251 })
	hive.AddConfigOverride(h, func(c *file.Config) { c.Manifests = dir })
	hive.AddConfigOverride(h, func(c *kubeapi.NodeConfig) { c.K8sNodeName = "node-a" })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := h.Start(log, context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Stop(log, context.Background()) })
	settle := func() {
		if err := waitSettled(p.db, p.w, p.frontends, rec); err != nil {
			t.Fatal(err)
		}
	}
	settle()
	dp, err := bpf.LoadDatapath(p.maps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	return p, dp, settle
}

var (
	explainExact  = regexp.MustCompile(`(?m)^(?:affinity: .* is pinned .* to|maglev: flow .* hashes to slot \d+ of \d+:) backend \d+ (\S+) \(`)
	explainShares = regexp.MustCompile(`(?m)^  backend \d+ (\S+) \(.*\): \d+ of \d+ slots`)
)

// explainedFlow is what explain says of a new flow: dropped, or sent to
// exactly one backend, or to one of several.
type explainedFlow struct {
	dropped  bool
	backends []netip.AddrPort
}

func parseExplain(t *testing.T, out string) explainedFlow {
	t.Helper()
	if strings.Contains(out, "DROPPED") || strings.Contains(out, "no backend takes new flows") {
		return explainedFlow{dropped: true}
	}
	var e explainedFlow
	matches := explainExact.FindAllStringSubmatch(out, 1)
	if matches == nil {
		matches = explainShares.FindAllStringSubmatch(out, -1)
	}
	for _, m := range matches {
		e.backends = append(e.backends, lb.MustParseL3n4Addr(m[1]).AddrPort())
	}
	if len(e.backends) == 0 {
		t.Fatalf("explain names no backend:\n%s", out)
	}
	return e
}

// agree sends n new flows to random frontends of p through the kernel
// datapath and checks that each goes where explain says (with Maglev or
// affinity, exactly that backend; with random slots, one of them) and to
// one of the backends selection gave the frontend to take new flows.
func agree(t *testing.T, p *pipeline, dp *bpf.Datapath, rng *rand.Rand, n int) {
	t.Helper()
	var fes []*lb.Frontend
	for fe := range p.frontends.All(p.db.ReadTxn()) {
		if fe.ID != 0 && fe.Type != lb.SVCTypeLocalRedirect {
			fes = append(fes, fe)
		}
	}
	kinds := map[string]int{}
	defer func() { t.Logf("%d flows: %v", n, kinds) }()
	for range n {
		fe := fes[rng.IntN(len(fes))]
		client := randomClient(rng, fe)
		prog, dst := "lb_tc_ingress", fe.Address.AddrPort()
		if fe.Address.Scope() == lb.ScopeInternal {
			prog = "lb_tc_workload"
		}
		if dst.Addr().IsUnspecified() { // a NodePort on every node address: one that is local
			dst = netip.AddrPortFrom(netip.MustParseAddr(map[bool]string{true: "127.0.0.1", false: "::1"}[dst.Addr().Is4()]), dst.Port())
		}
		proto := fe.Address.Protocol()
		if proto == lb.ProtoAny {
			proto = lb.ProtoTCP
		}
		want := parseExplain(t, explainText(t, p.maps, fe.Address.String(), client.String()))
		verdict, out := bpftest.Send(t, dp.Program(prog), bpftest.Flow{Src: client, Dst: dst, Proto: proto})
		var selected []netip.AddrPort
		for _, b := range fe.Backends {
			if b.Weight > 0 {
				selected = append(selected, b.Address.AddrPort())
			}
		}
		switch {
		case want.dropped:
			kinds["dropped"]++
		case len(want.backends) == 1:
			kinds["exactly one backend"]++
		default:
			kinds["one of several"]++
		}
		if fe.Address.Scope() == lb.ScopeInternal {
			kinds["internal scope"]++
		}
		if fe.Address.Addr().IsUnspecified() {
			kinds["any-address NodePort"]++
		}
		switch {
		case want.dropped:
			if verdict != 2 {
				t.Fatalf("%s from %s: explain says dropped; the kernel sent it to %s", fe.Address, client, out.Dst)
			}
		case verdict != 0 || !slices.Contains(want.backends, out.Dst):
			t.Fatalf("%s from %s: the kernel sent it to %s (verdict %d); explain says %v", fe.Address, client, out.Dst, verdict, want.backends)
		case !slices.Contains(selected, out.Dst):
			t.Fatalf("%s from %s: the kernel sent it to %s; selection gave %v", fe.Address, client, out.Dst, selected)
		}
	}
}

// randomClient returns a client of the frontend's family; for a frontend
// restricted by source ranges, half the time one inside a range.
func randomClient(rng *rand.Rand, fe *lb.Frontend) netip.AddrPort {
	var a [16]byte
	for i := range a {
		a[i] = byte(rng.Uint32())
	}
	addr := netip.AddrFrom16(a)
	if fe.Address.Addr().Is4() {
		addr = netip.AddrFrom4([4]byte(a[:4]))
	}
	if ranges := fe.Policy.SourceRanges; len(ranges) > 0 && rng.IntN(2) == 0 {
		r := ranges[rng.IntN(len(ranges))]
		if r.Addr().Is4() == addr.Is4() {
			b := r.Addr().AsSlice()
			for i := (r.Bits() + 7) / 8; i < len(b); i++ {
				b[i] = addr.AsSlice()[i]
			}
			addr, _ = netip.AddrFromSlice(b)
		}
	}
	// Clients repeat now and then, so that affinity pins get reused.
	return netip.AddrPortFrom(addr, uint16(1024+rng.IntN(60000)))
}

// For 10,000 random flows to the demo's frontends, the backend the kernel
// datapath picks is the one lbctl explain names (with Maglev, the exact
// backend; with random slots, one of them), among those selection chose.
func TestExplainAgreesWithTheKernelOnTheDemo(t *testing.T) {
	p, dp, _ := kernelPipeline(t, "../../examples/demo")
	agree(t, p, dp, rand.New(rand.NewPCG(5, 6)), 10000)
}

// The same over 20 rounds of random Writer operations (services of every
// frontend type and both families, algorithms, affinity, source ranges,
// traffic policies, backends coming and going with random weights and
// states), 500 flows after each round.
func TestExplainAgreesWithTheKernelThroughRandomWriterOperations(t *testing.T) {
	p, dp, settle := kernelPipeline(t, "")
	rng := rand.New(rand.NewPCG(7, 8))
	txn := p.w.WriteTxn()
	if err := p.w.SetLocalNode(txn, lb.SourceAPI, lb.Node{Name: "node-a", Addresses: []netip.Addr{netip.MustParseAddr("192.168.1.10")}}); err != nil {
		t.Fatal(err)
	}
	txn.Commit()
	for round := range 20 {
		txn := p.w.WriteTxn()
		for range 1 + rng.IntN(6) {
			if err := randomServiceChange(p.w, txn, rng); err != nil {
				txn.Abort()
				t.Fatal(err)
			}
		}
		txn.Commit()
		settle()
		t.Run(fmt.Sprint("round ", round), func(t *testing.T) { agree(t, p, dp, rng, 500) })
	}
}

// randomServiceChange declares one of 8 services afresh, or sets its
// backends, at random.
func randomServiceChange(w *tables.Writer, txn statedb.WriteTxn, rng *rand.Rand) error {
	i := rng.IntN(8)
	name := lb.NewServiceName("test", fmt.Sprintf("svc-%d", i))
	proto := []lb.Protocol{lb.ProtoTCP, lb.ProtoUDP}[rng.IntN(2)]
	if rng.IntN(2) == 0 {
		policies := []lb.TrafficPolicy{lb.TrafficPolicyCluster, lb.TrafficPolicyLocal}
		svc := lb.ServiceParams{
			Name: name, Source: lb.SourceK8s,
			Algorithm:        []lb.Algorithm{lb.AlgorithmRandom, lb.AlgorithmMaglev}[rng.IntN(2)],
			ExtTrafficPolicy: policies[rng.IntN(2)], IntTrafficPolicy: policies[rng.IntN(2)],
			SessionAffinity: rng.IntN(3) == 0,
		}
		if rng.IntN(3) == 0 {
			svc.SourceRanges = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("2001:db8:1::/48")}
		}
		at := func(a string, port int, typ lb.SVCType) lb.FrontendParams {
			return lb.FrontendParams{Address: lb.NewL3n4Addr(proto, netip.MustParseAddr(a), uint16(port), lb.ScopeExternal), Type: typ}
		}
		svc.Frontends = []lb.FrontendParams{
			at(fmt.Sprintf("10.96.0.%d", i+1), 80, lb.SVCTypeClusterIP),
			at(fmt.Sprintf("fd00:96::%d", i+1), 80, lb.SVCTypeClusterIP),
		}
		switch rng.IntN(4) {
		case 0:
			svc.Frontends = append(svc.Frontends, at("0.0.0.0", 30000+i, lb.SVCTypeNodePort), at("192.168.1.10", 30000+i, lb.SVCTypeNodePort))
		case 1:
			svc.Frontends = append(svc.Frontends, at(fmt.Sprintf("203.0.113.%d", i+1), 80, lb.SVCTypeLoadBalancer),
				at(fmt.Sprintf("2001:db8:ff::%d", i+1), 80, lb.SVCTypeLoadBalancer))
		case 2:
			svc.Frontends = append(svc.Frontends, at(fmt.Sprintf("198.18.0.%d", i+1), 80, lb.SVCTypeExternalIP))
		case 3:
			svc.Frontends = append(svc.Frontends, at("192.168.1.10", 8000+i, lb.SVCTypeHostPort))
		}
		if svc.ExtTrafficPolicy != svc.IntTrafficPolicy {
			for _, f := range svc.Frontends {
				if f.Type.IsExternal() {
					svc.Frontends = append(svc.Frontends, lb.FrontendParams{Address: f.Address.WithScope(lb.ScopeInternal), Type: f.Type})
				}
			}
		}
		if err := w.UpsertService(txn, svc); err != nil {
			return err
		}
	}
	var bes []lb.BackendParams
	for j := range 12 {
		if rng.IntN(2) == 0 {
			continue
		}
		a := netip.AddrFrom4([4]byte{10, 1, byte(i), byte(j + 1)})
		if j%3 == 2 {
			a = netip.AddrFrom16([16]byte{0xfd, 0, 0, 1, 14: byte(i), 15: byte(j + 1)})
		}
		bes = append(bes, lb.BackendParams{
			Address:  lb.NewL3n4Addr(proto, a, 8080, lb.ScopeExternal),
			Weight:   uint16(rng.IntN(300)),
			NodeName: []string{"node-a", "node-b"}[rng.IntN(2)],
			State:    []lb.BackendState{lb.BackendActive, lb.BackendActive, lb.BackendTerminating}[rng.IntN(3)],
		})
	}
	return w.SetBackends(txn, name, lb.SourceK8s, bes...)
}
