package tables

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/lbstate/lbstate/lb"
)

func newTestWriter(t testing.TB) *Writer {
	t.Helper()
	w, err := New(statedb.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// mustWrite runs fn in a write transaction and commits it.
func mustWrite(t testing.TB, w *Writer, fn func(txn statedb.WriteTxn) error) {
	t.Helper()
	txn := w.WriteTxn()
	defer txn.Abort()
	if err := fn(txn); err != nil {
		t.Fatal(err)
	}
	txn.Commit()
}

// opGen turns a byte stream (from the fuzzer or a PRNG) into Writer
// operations over a small universe of names and addresses, small enough
// that conflicts, shared backends and redirect chains happen often.
type opGen struct {
	data []byte
	pos  int
}

func (g *opGen) next(n int) int {
	if g.pos >= len(g.data) {
		return 0
	}
	b := g.data[g.pos]
	g.pos++
	return int(b) % n
}

func (g *opGen) done() bool { return g.pos >= len(g.data) }

var (
	genNames = []lb.ServiceName{
		lb.NewServiceName("default", "a"), lb.NewServiceName("default", "b"),
		lb.NewServiceName("default", "c"), lb.NewServiceName("other", "a").WithCluster("c2"),
	}
	genSources  = []lb.Source{lb.SourceAPI, lb.SourceK8s, lb.SourceKVStore, lb.SourceRedirect}
	genFrontEnd = []lb.L3n4Addr{
		lb.MustParseL3n4Addr("10.96.0.1:80/TCP"), lb.MustParseL3n4Addr("10.96.0.2:80/TCP"),
		lb.MustParseL3n4Addr("0.0.0.0:30000/TCP"), lb.MustParseL3n4Addr("0.0.0.0:30000/TCP/i"),
		lb.MustParseL3n4Addr("[fd00::1]:53/UDP"),
	}
	genBackends = []lb.L3n4Addr{
		lb.MustParseL3n4Addr("10.0.0.1:80/TCP"), lb.MustParseL3n4Addr("10.0.0.2:80/TCP"),
		lb.MustParseL3n4Addr("10.0.0.3:80/TCP"), lb.MustParseL3n4Addr("10.0.0.1:53/UDP"),
		lb.MustParseL3n4Addr("[fd00:1::1]:53/UDP"), lb.MustParseL3n4Addr("10.0.0.4:80/ANY"),
	}
	genTypes     = []lb.SVCType{lb.SVCTypeClusterIP, lb.SVCTypeLoadBalancer, lb.SVCTypeNodePort, lb.SVCTypeHostPort}
	genCreated   = []time.Time{{}, time.Unix(1700000000, 0), time.Unix(1700000001, 0)}
	genNodes     = []string{"n1", "n2", "n3"}
	genZones     = []string{"", "z1", "z2"}
	genPortNames = []string{"", "http", "dns"}
	genKeys      = [][]string{nil, {zoneKey, lb.TopologyKeyAny}, {lb.TopologyKeyHostname, zoneKey}, {zoneKey}}
)

func (g *opGen) serviceParams() lb.ServiceParams {
	p := lb.ServiceParams{
		Name:                genNames[g.next(len(genNames))],
		Source:              genSources[g.next(len(genSources))],
		ExtTrafficPolicy:    lb.TrafficPolicy(g.next(2)),
		IntTrafficPolicy:    lb.TrafficPolicy(g.next(2)),
		TrafficDistribution: lb.TrafficDistribution(g.next(3)),
		Algorithm:           lb.Algorithm(g.next(3)),
	}
	p.Created = genCreated[g.next(len(genCreated))]
	p.TopologyKeys = genKeys[g.next(len(genKeys))]
	for _, addr := range genFrontEnd {
		if g.next(2) == 1 {
			// Any type and claim on any address, so that every kind of
			// claim meets every other.
			fe := lb.FrontendParams{Address: addr, Type: genTypes[g.next(len(genTypes))], PortName: genPortNames[g.next(3)], Claim: lb.Claim(g.next(3))}
			if fe.Validate() != nil {
				fe.Claim = lb.ClaimExplicit // a claim the type cannot have
			}
			p.Frontends = append(p.Frontends, fe)
		}
	}
	return p
}

func (g *opGen) backends() []lb.BackendParams {
	var out []lb.BackendParams
	for _, addr := range genBackends {
		if g.next(2) == 0 {
			continue
		}
		b := lb.BackendParams{
			Address:  addr,
			Weight:   []uint16{0, 1, 100, 65535}[g.next(4)],
			NodeName: genNodes[g.next(3)],
			Zone:     genZones[g.next(3)],
			State:    lb.BackendState(g.next(5)), // every state, not-ready included
		}
		if n := genPortNames[g.next(3)]; n != "" {
			b = b.WithPortNames(n)
		}
		var forZones, forNodes []string
		if z := genZones[g.next(3)]; z != "" {
			forZones = []string{z}
		}
		if n := g.next(4); n < 3 {
			forNodes = []string{genNodes[n]}
		}
		b = b.WithTopologyHints(forZones, forNodes)
		out = append(out, b)
	}
	return out
}

func (g *opGen) addrs() []lb.L3n4Addr {
	var out []lb.L3n4Addr
	for _, a := range genBackends {
		if g.next(2) == 1 {
			out = append(out, a)
		}
	}
	return out
}

// step applies one generated operation and returns a description of it
// and, for DeleteSource, the source deleted.
func (g *opGen) step(t testing.TB, w *Writer, txn statedb.WriteTxn) (string, lb.Source) {
	desc, del, apply := g.op()
	if err := apply(w, txn); err != nil {
		t.Fatalf("%s: %v", desc, err)
	}
	return desc, del
}

// op generates one operation: its description, the source it deletes (for
// DeleteSource) and how to apply it to a Writer.
func (g *opGen) op() (string, lb.Source, func(*Writer, statedb.WriteTxn) error) {
	name := func() lb.ServiceName { return genNames[g.next(len(genNames))] }
	src := func() lb.Source { return genSources[g.next(len(genSources))] }
	switch g.next(10) {
	case 0, 1:
		p := g.serviceParams()
		return fmt.Sprintf("UpsertService(%s, %s, %d frontends)", p.Name, p.Source, len(p.Frontends)), 0,
			func(w *Writer, txn statedb.WriteTxn) error { return w.UpsertService(txn, p) }
	case 2:
		n, s := name(), src()
		return fmt.Sprintf("DeleteService(%s, %s)", n, s), 0,
			func(w *Writer, txn statedb.WriteTxn) error { return w.DeleteService(txn, n, s) }
	case 3:
		n, s, bs := name(), src(), g.backends()
		return fmt.Sprintf("UpsertBackends(%s, %s, %d)", n, s, len(bs)), 0,
			func(w *Writer, txn statedb.WriteTxn) error { return w.UpsertBackends(txn, n, s, bs...) }
	case 4:
		n, s, bs := name(), src(), g.backends()
		return fmt.Sprintf("SetBackends(%s, %s, %d)", n, s, len(bs)), 0,
			func(w *Writer, txn statedb.WriteTxn) error { return w.SetBackends(txn, n, s, bs...) }
	case 5:
		n, s, as := name(), src(), g.addrs()
		return fmt.Sprintf("ReleaseBackends(%s, %s, %v)", n, s, as), 0,
			func(w *Writer, txn statedb.WriteTxn) error { return w.ReleaseBackends(txn, n, s, as...) }
	case 6:
		del := src()
		return fmt.Sprintf("DeleteSource(%s)", del), del,
			func(w *Writer, txn statedb.WriteTxn) error { return w.DeleteSource(txn, del) }
	case 7:
		a, healthy := genBackends[g.next(len(genBackends))], g.next(2) == 1
		return fmt.Sprintf("SetBackendHealth(%s, %v)", a, healthy), 0,
			func(w *Writer, txn statedb.WriteTxn) error {
				if err := w.SetBackendHealth(txn, a, healthy); err != nil && !strings.HasSuffix(err.Error(), "not found") {
					return err
				}
				return nil
			}
	case 8:
		n, to, s, skip := name(), name(), src(), g.next(2) == 1
		return fmt.Sprintf("SetRedirect(%s -> %s, %s, skip=%v)", n, to, s, skip), 0,
			func(w *Writer, txn statedb.WriteTxn) error {
				if err := w.SetRedirect(txn, n, lb.Redirect{Source: s, To: to, SkipFromBackend: skip}); err != nil && n != to {
					return err // n == to is rejected, as it should be
				}
				return nil
			}
	default:
		switch g.next(8) {
		case 0:
			n, s := name(), src()
			return fmt.Sprintf("ClearRedirect(%s, %s)", n, s), 0,
				func(w *Writer, txn statedb.WriteTxn) error { return w.ClearRedirect(txn, n, s) }
		case 4:
			pr := lb.ProxyRedirect{Source: src(), ProxyPort: uint16(15000 + g.next(3))}
			if g.next(2) == 1 {
				pr.Ports = []string{"http"}
			}
			n := name()
			return fmt.Sprintf("SetProxyRedirect(%s, %s)", n, pr), 0,
				func(w *Writer, txn statedb.WriteTxn) error { return w.SetProxyRedirect(txn, n, pr) }
		case 5:
			n, s := name(), src()
			return fmt.Sprintf("ClearProxyRedirect(%s, %s)", n, s), 0,
				func(w *Writer, txn statedb.WriteTxn) error { return w.ClearProxyRedirect(txn, n, s) }
		case 6:
			r := lb.Route{Source: src(), Name: "r", Port: []uint16{0, 80, 443}[g.next(3)]}
			for range g.next(4) {
				r.Backends = append(r.Backends, lb.RouteBackend{Service: name(), Port: []uint16{0, 80}[g.next(2)], Weight: uint32(g.next(4))})
			}
			n := name()
			return fmt.Sprintf("SetRoute(%s, %v)", n, r), 0,
				func(w *Writer, txn statedb.WriteTxn) error { return w.SetRoute(txn, n, r) }
		case 7:
			n, s, port := name(), src(), []uint16{0, 80, 443}[g.next(3)]
			return fmt.Sprintf("ClearRoute(%s, %s, %d)", n, s, port), 0,
				func(w *Writer, txn statedb.WriteTxn) error { return w.ClearRoute(txn, n, s, port) }
		case 1:
			node, s := lb.Node{Name: genNodes[g.next(3)], Zone: genZones[g.next(3)]}, src()
			if z := genZones[g.next(3)]; z != "" {
				node.Labels = map[string]string{zoneKey: z}
			}
			return fmt.Sprintf("SetLocalNode(%s, %s, %s, %v)", s, node.Name, node.Zone, node.Labels), 0,
				func(w *Writer, txn statedb.WriteTxn) error { return w.SetLocalNode(txn, s, node) }
		case 2:
			node, labels := genNodes[g.next(3)], map[string]string{}
			if z := genZones[g.next(3)]; z != "" {
				labels[zoneKey] = z
			}
			return fmt.Sprintf("SetNodeLabels(%s, %v)", node, labels), 0,
				func(w *Writer, txn statedb.WriteTxn) error { return w.SetNodeLabels(txn, node, labels) }
		}
		node := genNodes[g.next(3)]
		return fmt.Sprintf("DeleteNode(%s)", node), 0,
			func(w *Writer, txn statedb.WriteTxn) error { return w.DeleteNode(txn, node) }
	}
}

// runOps applies the operations encoded in data, checking the invariants
// after each one.
func runOps(t testing.TB, data []byte) {
	w := newTestWriter(t)
	g := &opGen{data: data}
	var history []string
	for !g.done() {
		txn := w.WriteTxn()
		desc, deleted := g.step(t, w, txn)
		history = append(history, desc)
		rtxn := txn.Commit()
		err := checkInvariants(w, rtxn, deleted)
		if err == nil && (g.done() || len(history)%50 == 0) {
			err = compareWithRebuild(w, rtxn)
		}
		if err != nil {
			t.Fatalf("after %d ops: %v\nops:\n  %s", len(history), err, strings.Join(history, "\n  "))
		}
	}
}

// checkInvariants checks the relations between the tables that the Writer
// promises.
func checkInvariants(w *Writer, txn statedb.ReadTxn, deleted lb.Source) error {
	if err := checkBackendAddrs(w, txn); err != nil {
		return err
	}
	for b := range w.Backends().All(txn) {
		if len(b.Instances) == 0 {
			return fmt.Errorf("backend %s has no instance", b.Address)
		}
		for _, inst := range b.Instances {
			if deleted != 0 && inst.Source == deleted {
				return fmt.Errorf("backend %s keeps an instance of deleted source %s", b.Address, deleted)
			}
		}
	}
	for s := range w.Services().All(txn) {
		if len(s.Params) == 0 && !s.Overridden() {
			return fmt.Errorf("service %s: empty row left behind", s.Name)
		}
		if deleted != 0 && slices.ContainsFunc(s.Routes(), func(r lb.Route) bool { return r.Source == deleted }) {
			return fmt.Errorf("service %s keeps a route of deleted source %s", s.Name, deleted)
		}
		for _, p := range s.Params {
			if deleted != 0 && p.Source == deleted {
				return fmt.Errorf("service %s keeps a declaration of deleted source %s", s.Name, deleted)
			}
		}
		if deleted != 0 && slices.ContainsFunc(s.Redirects(), func(r lb.Redirect) bool { return r.Source == deleted }) {
			return fmt.Errorf("service %s keeps a redirect of deleted source %s", s.Name, deleted)
		}
		if deleted != 0 && slices.ContainsFunc(s.ProxyRedirects(), func(pr lb.ProxyRedirect) bool { return pr.Source == deleted }) {
			return fmt.Errorf("service %s keeps a proxy redirect of deleted source %s", s.Name, deleted)
		}
	}
	for fe := range w.Frontends().All(txn) {
		svc, _, found := w.Services().Get(txn, ServiceByName.Query(fe.Service))
		if !found || svc.Policy() == nil {
			return fmt.Errorf("frontend %s: owner %s is not a declared service", fe.Address, fe.Service)
		}
		if !slices.ContainsFunc(svc.Policy().Frontends, func(p lb.FrontendParams) bool { return p == fe.FrontendParams }) {
			return fmt.Errorf("frontend %s: not declared as such by its owner %s", fe.Address, fe.Service)
		}
		from := []lb.ServiceName{fe.Service}
		if !fe.RedirectedTo().IsZero() {
			from = []lb.ServiceName{fe.RedirectedTo()}
		} else if fe.RoutedBy() != "" {
			// the route's services' (the parent's own are hidden)
			route := svc.RouteFor(svc.Policy().ServicePort(fe.FrontendParams))
			if route == nil || route.Name != fe.RoutedBy() {
				return fmt.Errorf("frontend %s: routed by %s, not the route in force %v", fe.Address, fe.RoutedBy(), route)
			}
			from = nil
			for _, rb := range route.Backends {
				from = append(from, rb.Service)
			}
		}
		if fe.RedirectedTo().IsZero() && (fe.SkipFromBackend() || fe.RoutedBy() == "" && len(fe.Hidden()) > 0) {
			return fmt.Errorf("frontend %s: hidden backends or skip-from-backend without a redirect or route", fe.Address)
		}
		var wantPort uint16
		if pr := svc.ProxyRedirect(); pr != nil && pr.Covers(fe.FrontendParams) {
			wantPort = pr.ProxyPort
		}
		if fe.ProxyPort() != wantPort {
			return fmt.Errorf("frontend %s: proxy port %d, the proxy redirect in force says %d", fe.Address, fe.ProxyPort(), wantPort)
		}
		for _, ref := range fe.Hidden() {
			b, _, found := w.Backends().Get(txn, BackendByAddress.Query(ref.Address))
			if !found {
				return fmt.Errorf("frontend %s: hidden backend %s is not in the backends table", fe.Address, ref.Address)
			}
			if _, ok := b.ForService(fe.Service); !ok {
				return fmt.Errorf("frontend %s: hidden backend %s has no instance for %s", fe.Address, ref.Address, fe.Service)
			}
		}
		for _, ref := range fe.Backends {
			b, _, found := w.Backends().Get(txn, BackendByAddress.Query(ref.Address))
			if !found {
				return fmt.Errorf("frontend %s: backend %s is not in the backends table", fe.Address, ref.Address)
			}
			if !slices.ContainsFunc(from, func(n lb.ServiceName) bool { _, ok := b.ForService(n); return ok }) {
				return fmt.Errorf("frontend %s: backend %s has no instance for %v", fe.Address, ref.Address, from)
			}
		}
		// The owner outranks every other claimant.
		for other := range w.Services().All(txn) {
			if other.Name != fe.Service && claims(other, fe.Address) && outranks(other, svc, fe.Address) {
				return fmt.Errorf("frontend %s: owned by %s but %s outranks it", fe.Address, fe.Service, other.Name)
			}
		}
	}
	for s := range w.Services().All(txn) {
		p := s.Policy()
		if p == nil {
			continue
		}
		for _, fe := range p.Frontends {
			if _, _, found := w.Frontends().Get(txn, FrontendByAddress.Query(fe.Address)); !found {
				return fmt.Errorf("service %s: claimed address %s has no frontend row", s.Name, fe.Address)
			}
		}
	}
	return nil
}

// checkBackendAddrs checks that each service's backend addresses (in its
// row, or in orphan-backends when it has none) are exactly those of the
// backends with an instance for it, sorted.
func checkBackendAddrs(w *Writer, txn statedb.ReadTxn) error {
	want := map[lb.ServiceName][]lb.L3n4Addr{}
	for b := range w.Backends().All(txn) {
		for _, name := range b.Services() {
			want[name] = append(want[name], b.Address)
		}
	}
	got := map[lb.ServiceName][]lb.L3n4Addr{}
	for s := range w.Services().All(txn) {
		if len(s.BackendAddrs()) > 0 {
			got[s.Name] = s.BackendAddrs()
		}
	}
	for o := range w.t.orphans.All(txn) {
		if len(o.Addrs) == 0 {
			return fmt.Errorf("orphan-backends %s: empty row left behind", o.Service)
		}
		if _, found := w.service(txn, o.Service); found {
			return fmt.Errorf("orphan-backends %s: the service has a row", o.Service)
		}
		got[o.Service] = o.Addrs
	}
	for name, addrs := range want {
		slices.SortFunc(addrs, lb.L3n4Addr.Compare)
		if !slices.Equal(got[name], addrs) {
			return fmt.Errorf("service %s: backend addresses %v, its backends are at %v", name, got[name], addrs)
		}
		delete(got, name)
	}
	for name, addrs := range got {
		return fmt.Errorf("service %s: backend addresses %v, but it has no backends", name, addrs)
	}
	return nil
}

// compareWithRebuild replays the base state (declarations, redirects,
// backend instances, health, node) into fresh tables and compares the
// derived state: it must not depend on the order things arrived in.
func compareWithRebuild(w *Writer, txn statedb.ReadTxn) error {
	fresh, err := New(statedb.New(), nil)
	if err != nil {
		return err
	}
	wtxn := fresh.WriteTxn()
	defer wtxn.Abort()
	// Declarations in reverse order of priority: the node in force must
	// not depend on it.
	var decls []*NodeDeclaration
	for d := range w.t.nodeDecls.All(txn) {
		decls = append(decls, d)
	}
	for _, d := range slices.Backward(decls) {
		if err := fresh.SetLocalNode(wtxn, d.Source, d.Node); err != nil {
			return err
		}
	}
	for n := range w.NodeLabels().All(txn) {
		labels := map[string]string{}
		for _, l := range n.Labels {
			labels[l.Key] = l.Value
		}
		if err := fresh.SetNodeLabels(wtxn, n.Name, labels); err != nil {
			return err
		}
	}
	for b := range w.Backends().All(txn) {
		for _, inst := range b.Instances {
			if err := fresh.UpsertBackends(wtxn, inst.Service, inst.Source, inst.Params); err != nil {
				return err
			}
		}
		if b.Unhealthy {
			if err := fresh.SetBackendHealth(wtxn, b.Address, false); err != nil {
				return err
			}
		}
	}
	for s := range w.Services().All(txn) {
		for _, p := range s.Params {
			if err := fresh.UpsertService(wtxn, p); err != nil {
				return err
			}
		}
		for _, r := range s.Redirects() {
			if err := fresh.SetRedirect(wtxn, s.Name, r); err != nil {
				return err
			}
		}
		for _, pr := range s.ProxyRedirects() {
			if err := fresh.SetProxyRedirect(wtxn, s.Name, pr); err != nil {
				return err
			}
		}
		for _, r := range s.Routes() {
			if err := fresh.SetRoute(wtxn, s.Name, r); err != nil {
				return err
			}
		}
	}
	if got, want := frontendsDump(w, txn), frontendsDump(fresh, wtxn); got != want {
		return fmt.Errorf("frontends differ from a rebuild:\n--- incremental\n%s--- rebuild\n%s", got, want)
	}
	if got, want := topologyDump(w, txn), topologyDump(fresh, wtxn); got != want {
		return fmt.Errorf("topology-services differ from a rebuild:\n--- incremental\n%s--- rebuild\n%s", got, want)
	}
	if got, want := conflictsDump(w, txn), conflictsDump(fresh, wtxn); got != want {
		return fmt.Errorf("conflicts differ from a rebuild:\n--- incremental\n%s--- rebuild\n%s", got, want)
	}
	return nil
}

func frontendsDump(w *Writer, txn statedb.ReadTxn) string {
	var sb strings.Builder
	for fe := range w.Frontends().All(txn) {
		row := fe.TableRow()[:7] // what the Writer derives: up to Proxy
		fmt.Fprintf(&sb, "%s policy=%s", strings.Join(row, " | "), fe.Policy.Source)
		if len(fe.Hidden()) > 0 {
			fmt.Fprintf(&sb, " hidden=%v", fe.Hidden())
		}
		if fe.TopologyLevel() != "" {
			fmt.Fprintf(&sb, " topology=%s", fe.TopologyLevel())
		}
		sb.WriteString("\n")
	}
	return sb.String()
}

func topologyDump(w *Writer, txn statedb.ReadTxn) string {
	var sb strings.Builder
	for t := range w.t.topology.All(txn) {
		fmt.Fprintln(&sb, strings.Join(t.TableRow(), " | "))
	}
	return sb.String()
}

func conflictsDump(w *Writer, txn statedb.ReadTxn) string {
	var sb strings.Builder
	for s := range w.Services().All(txn) {
		fmt.Fprintf(&sb, "%s %v\n", s.Name, s.Conflicts())
	}
	return sb.String()
}

// FuzzWriter applies random Writer operations, checks the invariants after
// each one, and compares with a rebuild from scratch every 50 operations
// and at the end.
func FuzzWriter(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3})
	f.Add([]byte{0, 0, 1, 1, 1, 1, 1, 3, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 8, 1, 0, 2, 6, 1})
	for seed := range uint64(8) {
		f.Add(randomBytes(seed, 400))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1500 {
			data = data[:1500]
		}
		runOps(t, data)
	})
}

// forSeeds runs fn as a subtest per seed: seeds of them, short of them
// with -short.
func forSeeds(t *testing.T, seeds, short int, fn func(t *testing.T, seed uint64)) {
	if testing.Short() {
		seeds = short
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { fn(t, seed) })
	}
}

// TestWriterRandomOps runs long random operation sequences, so that plain
// `go test` covers what the fuzzer explores.
func TestWriterRandomOps(t *testing.T) {
	forSeeds(t, 20, 3, func(t *testing.T, seed uint64) {
		runOps(t, randomBytes(seed, 3000))
	})
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 42))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return b
}

// FrontendsOf yields a service's frontends in declaration order, without
// the ones another service owns.
func TestFrontendsOf(t *testing.T) {
	w := newTestWriter(t)
	a, b := lb.NewServiceName("ns", "a"), lb.NewServiceName("ns", "b")
	shared, own := lb.MustParseL3n4Addr("10.96.0.1:80/TCP"), lb.MustParseL3n4Addr("10.96.0.2:80/TCP")
	fe := func(addr lb.L3n4Addr) lb.FrontendParams {
		return lb.FrontendParams{Address: addr, Type: lb.SVCTypeClusterIP}
	}
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		if err := w.UpsertService(txn, lb.ServiceParams{Name: a, Source: lb.SourceAPI, Frontends: []lb.FrontendParams{fe(shared)}}); err != nil {
			return err
		}
		return w.UpsertService(txn, lb.ServiceParams{Name: b, Source: lb.SourceK8s, Frontends: []lb.FrontendParams{fe(own), fe(shared)}})
	})
	addrs := func(name lb.ServiceName) (out []string) {
		for f := range w.FrontendsOf(w.db.ReadTxn(), name) {
			out = append(out, f.Address.String())
		}
		return out
	}
	if got := addrs(a); !slices.Equal(got, []string{"10.96.0.1:80/TCP"}) {
		t.Errorf("FrontendsOf(a) = %v", got)
	}
	if got := addrs(b); !slices.Equal(got, []string{"10.96.0.2:80/TCP"}) {
		t.Errorf("FrontendsOf(b) = %v, want only the address a does not outrank it for", got)
	}
	if got := addrs(lb.NewServiceName("ns", "none")); got != nil {
		t.Errorf("FrontendsOf(unknown) = %v", got)
	}
}

// Random operations applied in batches (1 to 8 calls in one Writer.Batch)
// leave the tables exactly as the same calls made one by one do, and as
// consistent: the invariants hold and the frontends and conflicts equal a
// from-scratch rebuild after every batch.
func TestWriterBatchRandomOps(t *testing.T) {
	playBatches(t, 1000, 8, true, sameCall)
}

// sameCall makes one generated call on the batched Writer w and on ref.
func sameCall(g *opGen, w, ref *Writer, txn, refTxn statedb.WriteTxn) (string, error) {
	desc, _, apply := g.op()
	if err := apply(w, txn); err != nil {
		return desc, fmt.Errorf("%s: %w", desc, err)
	}
	if err := apply(ref, refTxn); err != nil {
		return desc, fmt.Errorf("%s (unbatched): %w", desc, err)
	}
	return desc, nil
}

// playBatches plays random calls (call makes one on w and on ref) in
// batches of 1 to maxBatch on w, one by one on ref, and checks after
// every batch that the invariants hold and that both Writers' tables are
// the same (and, with rebuild, equal a from-scratch rebuild).
func playBatches(t *testing.T, seedBase uint64, maxBatch int, rebuild bool, call func(g *opGen, w, ref *Writer, txn, refTxn statedb.WriteTxn) (string, error)) {
	forSeeds(t, 10, 2, func(t *testing.T, seed uint64) {
		w, ref := newTestWriter(t), newTestWriter(t)
		g := &opGen{data: randomBytes(seedBase+seed, 3000)}
		var history []string
		for !g.done() {
			txn, refTxn := w.WriteTxn(), ref.WriteTxn()
			n := 1 + g.next(maxBatch)
			err := w.Batch(txn, func() error {
				for range n {
					desc, err := call(g, w, ref, txn, refTxn)
					history = append(history, desc)
					if err != nil {
						return err
					}
				}
				return nil
			})
			if err == nil {
				rtxn, refRtxn := txn.Commit(), refTxn.Commit()
				// (A source deleted in a batch may be declared again by a
				// later call of it: no check for what it left.)
				err = checkInvariants(w, rtxn, 0)
				if err == nil && rebuild {
					err = compareWithRebuild(w, rtxn)
				}
				if err == nil {
					err = compareTables(w, rtxn, ref, refRtxn)
				}
			}
			if err != nil {
				txn.Abort() // (no-op once committed)
				refTxn.Abort()
				t.Fatalf("after %d ops: %v\nops:\n  %s", len(history), err, strings.Join(history, "\n  "))
			}
			history = append(history, "-- batch")
		}
	})
}

// compareTables reports how the rows of two Writers' tables differ,
// revisions and reconciler status aside.
func compareTables(a *Writer, atxn statedb.ReadTxn, b *Writer, btxn statedb.ReadTxn) error {
	dump := func(w *Writer, txn statedb.ReadTxn) string {
		var sb strings.Builder
		for s := range w.Services().All(txn) {
			j, _ := json.Marshal(s) // its overrides are behind a pointer
			fmt.Fprintf(&sb, "%s %v\n", j, s.BackendAddrs())
		}
		for be := range w.Backends().All(txn) {
			j, _ := json.Marshal(be) // its health details are behind a pointer
			fmt.Fprintf(&sb, "%s\n", j)
		}
		for fe := range w.Frontends().All(txn) {
			c := *fe
			c.Policy, c.Status = nil, reconciler.Status{}
			j, _ := json.Marshal(c) // its extras are behind a pointer
			fmt.Fprintf(&sb, "%s %+v\n", j, *fe.Policy)
		}
		return sb.String()
	}
	if da, db := dump(a, atxn), dump(b, btxn); da != db {
		return fmt.Errorf("batched and unbatched tables differ:\n--- batched\n%s--- unbatched\n%s", da, db)
	}
	return nil
}

func TestWriterBatchNested(t *testing.T) {
	w := newTestWriter(t)
	txn := w.WriteTxn()
	defer txn.Abort()
	err := w.Batch(txn, func() error {
		return w.Batch(txn, func() error { return nil })
	})
	if err == nil || !strings.Contains(err.Error(), "another batch") {
		t.Fatalf("nested Batch: %v", err)
	}
	// The outer batch is over: a new one may start.
	if err := w.Batch(txn, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
}
