package datapath_test

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	statedbreconciler "github.com/cilium/statedb/reconciler"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/bpf/datapath"
	"github.com/lbstate/lbstate/internal/syncbuf"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/metrics"
	"github.com/lbstate/lbstate/reconciler"
	"github.com/lbstate/lbstate/reflectors/health"
	"github.com/lbstate/lbstate/tables"
)

// The passive accrual scenario's backends: accepting on the node's
// loopback, refusing there (nobody listens, until the test starts a
// server), and blackholing in a namespace of its own behind a veth whose
// far end drops every packet.
const (
	acceptingBE   = "10.1.0.1:8080/TCP"
	refusingBE    = "10.1.0.2:8080/TCP"
	blackholingBE = "10.3.0.2:8080/TCP"
)

// passiveNode is the node of e2e_test.go with the three backends above,
// and an agent with --health-passive only (no probe), on a clock of the
// test's own: a tripped backend stays tripped until the test advances it.
type passiveNode struct {
	node, outside *bpftest.Netns
	cg            string
	clock         *manualClock
	log           *syncbuf.Buffer
	maps          *bpf.Maps

	h         *hive.Hive
	db        *statedb.DB
	w         *tables.Writer
	frontends statedb.Table[*lb.Frontend]
	rec       statedbreconciler.Reconciler[*lb.Frontend]
	reg       *prometheus.Registry

	refused int // connections the clients saw refused so far
}

func newPassiveNode(t *testing.T, mode string) *passiveNode {
	n := &passiveNode{node: bpftest.NewNetns(t), outside: bpftest.NewNetns(t), cg: bpftest.Cgroup(t),
		clock: newManualClock(), log: &syncbuf.Buffer{}}
	bpftest.Link(t, n.node, nodeDev, "198.51.100.1/24", n.outside, "lbout0", "198.51.100.2/24")
	n.outside.AddRoute(t, lbIP+"/32", "198.51.100.1")
	n.node.AddAddr(t, "10.1.0.1/32")
	n.node.AddAddr(t, "10.1.0.2/32")
	bpftest.ServeName(t, n.node, "10.1.0.1", 8080, "b1")
	hole := bpftest.NewNetns(t)
	bpftest.Link(t, n.node, "lbbh0", "10.3.0.1/24", hole, "lbbh1", "10.3.0.2/24")
	bpftest.Blackhole(t, hole, "lbbh1")
	n.node.Forward(t) // packets balanced at tc go on to the blackhole

	maps := kernelMaps(t, 0)
	n.maps = maps
	logger := slog.New(slog.NewTextHandler(n.log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	n.h = hive.New(
		statedb.Cell, job.Cell, cell.SimpleHealthCell, metrics.Cell, tables.Cell,
		cell.Provide(func() *bpf.Maps { return maps }, func() health.Clock { return n.clock }),
		reconciler.Cell, datapath.Cell, health.Cell,
		cell.Invoke(func(db *statedb.DB, w *tables.Writer, fes statedb.Table[*lb.Frontend],
			r statedbreconciler.Reconciler[*lb.Frontend], reg *prometheus.Registry) {
			n.db, n.w, n.frontends, n.rec, n.reg = db, w, fes, r, reg
		}),
	)
	hive.AddConfigOverride(n.h, func(c *datapath.Config) {
		// The default conntrack timeouts: a client port used again
		// while a refused or unanswered flow's entries live is balanced
		// anew (lb_ct_anew in bpf/c/tc.h), nothing waits them out.
		*c = datapath.Config{LBDatapath: mode, LBCgroup: n.cg, LBDevices: []string{nodeDev}}
	})
	hive.AddConfigOverride(n.h, func(c *health.Config) {
		*c = health.DefaultConfig
		c.HealthPassive = true
		c.HealthBackoffMin, c.HealthBackoffMax, c.HealthBackoffJitter = time.Second, 4*time.Second, 0
	})
	if err := n.node.Do(func() error { return n.h.Start(logger, context.Background()) }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.h.Stop(logger, context.Background()) })

	name := lb.NewServiceName("test", "web")
	var fes []lb.FrontendParams
	for ip, typ := range map[string]lb.SVCType{clusterIP: lb.SVCTypeClusterIP, lbIP: lb.SVCTypeLoadBalancer} {
		fes = append(fes, lb.FrontendParams{Address: lb.MustParseL3n4Addr(ip + ":80/TCP"), Type: typ})
	}
	txn := n.w.WriteTxn()
	err := n.w.UpsertService(txn, lb.ServiceParams{Name: name, Source: lb.SourceK8s, Algorithm: lb.AlgorithmRandom, Frontends: fes})
	if err == nil {
		err = n.w.SetBackends(txn, name, lb.SourceK8s, be(acceptingBE, 100), be(refusingBE, 100), be(blackholingBE, 100))
	}
	if err != nil {
		txn.Abort()
		t.Fatal(err)
	}
	txn.Commit()
	n.waitWeights(t, map[string]bool{acceptingBE: true, refusingBE: true, blackholingBE: true})
	n.waitChecked(t, 3)
	return n
}

// waitChecked waits until passive accrual checks count backends: it
// follows the frontends on its own, often after the reconciler has
// written them, and it ignores a report about a backend it does not
// check yet (a refusal the clients saw then is never counted).
func (n *passiveNode) waitChecked(t *testing.T, count int) {
	t.Helper()
	labels := map[string]string{"kind": "none"} // passive only: no probe
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		v := gaugeValue(t, n.reg, "lbstate_health_backends", labels)
		if v == float64(count) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("health checking checks %v backends, want %d", v, count)
		}
	}
}

// waitWeights waits until the frontends give new flows to exactly the
// backends marked true, and the maps say so too.
func (n *passiveNode) waitWeights(t *testing.T, takes map[string]bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		txn := n.db.ReadTxn()
		ok := true
		for fe := range n.frontends.All(txn) {
			for _, b := range fe.Backends {
				if takes[b.Address.String()] != (b.Weight > 0) {
					ok = false
				}
			}
		}
		if ok {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := reconciler.WaitReconciled(ctx, n.rec, n.frontends.Revision(txn)); err != nil {
				t.Fatal(err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the frontends never gave new flows to exactly %v", takes)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// connect makes n connections to the frontend in parallel batches, as a
// client in the cgroup on the node (socket LB) or outside (tc), each
// waiting at most 1.5 s for an answer (past the first SYN
// retransmission): the lines of bpftest.RunClient, "timeout ..." for an
// unanswered one.
func (n *passiveNode) connect(t *testing.T, mode string, count int) []string {
	t.Helper()
	cg, ns, to := n.cg, n.node, clusterIP+":80"
	if mode == datapath.ModeTC {
		cg, ns, to = "", n.outside, lbIP+":80"
	}
	const clients = 4
	var scripts []string
	for i := range clients {
		per := count / clients
		if i < count%clients {
			per++
		}
		scripts = append(scripts, fmt.Sprintf("tcpwait 1500ms %s %d", to, per))
	}
	lines := bpftest.RunClients(t, cg, ns, scripts...)
	for _, line := range lines {
		if strings.HasPrefix(line, "refused ") {
			n.refused++
		}
	}
	return lines
}

// waitRefusalsCounted waits until passive accrual has counted every
// refusal the clients saw so far: reports reach it through a ring buffer,
// and one still on its way when the breaker reopens would count against
// the probation.
func (n *passiveNode) waitRefusalsCounted(t *testing.T) {
	t.Helper()
	labels := map[string]string{"backend": refusingBE, "cause": "refused"}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		v := counterValue(t, n.reg, "lbstate_health_passive_failures_total", labels)
		if v >= float64(n.refused) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("passive accrual counted %v refusals of %s, the clients saw %d", v, refusingBE, n.refused)
		}
	}
}

// lines returns the log lines with msg about backend.
func (n *passiveNode) lines(msg, backend string) []string {
	var out []string
	for line := range strings.Lines(n.log.String()) {
		if strings.Contains(line, msg) && strings.Contains(line, "backend="+backend+" ") {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// A service with three backends, one accepting, one refusing and one
// blackholing SYNs, with passive accrual only: real connections through
// socket LB (from the node's cgroup) and through tc (from outside) trip
// the refusing backend and the blackholing one, each logged once with its
// cause; afterwards every new connection reaches the accepting one. Once
// the refusing one listens and the backoff runs out, the half-open rule
// gives it new connections again, and their successes close its breaker;
// the blackholing one, reopened too, trips again at its first timeout.
func TestPassiveAccrualTakesRefusingAndBlackholingBackendsOutOfRotation(t *testing.T) {
	for _, mode := range []string{datapath.ModeSocket, datapath.ModeTC} {
		t.Run(mode, func(t *testing.T) { testPassiveAccrual(t, mode) })
	}
}

func testPassiveAccrual(t *testing.T, mode string) {
	n := newPassiveNode(t, mode)
	source := map[string]string{datapath.ModeSocket: health.SourceSocket, datapath.ModeTC: health.SourceTC}[mode]

	// Connections until both have tripped (each takes a third of them,
	// and three failures trip).
	deadline := time.Now().Add(90 * time.Second)
	for len(n.lines("breaker tripped", refusingBE)) == 0 || len(n.lines("breaker tripped", blackholingBE)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("not both tripped; log:\n%s", n.log.String())
		}
		n.connect(t, mode, 12)
	}
	n.waitWeights(t, map[string]bool{acceptingBE: true})
	for _, c := range []struct{ backend, cause, err string }{
		{refusingBE, "refused", "connection refused"},
		{blackholingBE, "timeout", "connect timeout"},
	} {
		trips := n.lines("breaker tripped", c.backend)
		want := regexp.MustCompile(`service=test/web backend=` + regexp.QuoteMeta(c.backend) + ` failures=3 last_error="` + c.err +
			`" cause=` + c.cause + ` seen_by=` + source + ` probation=false`)
		if len(trips) != 1 || !want.MatchString(trips[0]) {
			t.Errorf("%s: trip lines %q, want one matching %s", c.backend, trips, want)
		}
	}
	for _, line := range n.connect(t, mode, 40) {
		if name, _, _ := strings.Cut(line, " "); name != "b1" {
			t.Errorf("after the trips, a new connection: %q, want b1's\n%s", line, n.diagnose(t))
		}
	}
	for _, m := range []struct {
		name   string
		labels map[string]string
	}{
		{"lbstate_health_passive_failures_total", map[string]string{"backend": refusingBE, "cause": "refused"}},
		{"lbstate_health_passive_failures_total", map[string]string{"backend": blackholingBE, "cause": "timeout"}},
		{"lbstate_datapath_connection_reports_total", map[string]string{"source": source, "result": "refused"}},
	} {
		if v := counterValue(t, n.reg, m.name, m.labels); v < 3 {
			t.Errorf("%s%v = %v, want at least 3", m.name, m.labels, v)
		}
	}
	if v := counterValue(t, n.reg, "lbstate_datapath_connection_reports_lost_total", nil); v != 0 {
		t.Errorf("%v reports lost", v)
	}

	// The refusing backend listens; the backoff runs out.
	n.waitRefusalsCounted(t)
	bpftest.ServeName(t, n.node, "10.1.0.2", 8080, "b2")
	n.clock.Advance(5 * time.Second)
	deadline = time.Now().Add(90 * time.Second)
	for len(n.lines("closed: probation passed", refusingBE)) == 0 || len(n.lines("breaker tripped", blackholingBE)) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the refusing backend, now listening, never passed probation, or the blackholing one never tripped again; log:\n%s", n.log.String())
		}
		n.connect(t, mode, 12)
	}
	if len(n.lines("breaker reopened", refusingBE)) != 1 {
		t.Errorf("reopened lines of %s: %q, want one", refusingBE, n.lines("breaker reopened", refusingBE))
	}
	if trips := n.lines("breaker tripped", blackholingBE); len(trips) != 2 || !strings.Contains(trips[1], "probation=true") {
		t.Errorf("%s, reopened with the others, did not trip again on probation: %q", blackholingBE, trips)
	}
	n.waitWeights(t, map[string]bool{acceptingBE: true, refusingBE: true})
	b2 := 0
	for _, line := range n.connect(t, mode, 40) {
		name, _, _ := strings.Cut(line, " ")
		if name != "b1" && name != "b2" {
			t.Errorf("after b2 recovered, a new connection: %q\n%s", line, n.diagnose(t))
		}
		if name == "b2" {
			b2++
		}
	}
	if b2 == 0 {
		t.Error("b2, recovered, took none of 40 new connections")
	}
	// Every connection of the last 40 was reported a success, as the
	// earlier ones to b1 and b2.
	// (Successes wake no reader: they are read within 100 ms.)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		v := counterValue(t, n.reg, "lbstate_datapath_connection_reports_total", map[string]string{"source": source, "result": "ok"})
		if v >= 40 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%v successes reported, want at least 40", v)
			break
		}
	}
}

// counterValue is the value of the counter name with labels (a subset
// of its labels) in reg, 0 if there is none.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	return metricValue(t, reg, name, labels, func(m *dto.Metric) float64 { return m.GetCounter().GetValue() })
}

// gaugeValue is counterValue for a gauge.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	return metricValue(t, reg, name, labels, func(m *dto.Metric) float64 { return m.GetGauge().GetValue() })
}

func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string, value func(*dto.Metric) float64) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for k, v := range labels {
				found := false
				for _, l := range m.GetLabel() {
					found = found || (l.GetName() == k && l.GetValue() == v)
				}
				if !found {
					continue metrics
				}
			}
			return value(m)
		}
	}
	return 0
}

// manualClock is a health.Clock that moves only when the test advances
// it.
type manualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers map[*manualTimer]struct{}
}

type manualTimer struct {
	at time.Time
	f  func()
}

func newManualClock() *manualClock {
	return &manualClock{now: time.Unix(1_800_000_000, 0), timers: map[*manualTimer]struct{}{}}
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) At(at time.Time, f func()) func() bool {
	c.mu.Lock()
	if !at.After(c.now) {
		c.mu.Unlock()
		f()
		return func() bool { return false }
	}
	tm := &manualTimer{at, f}
	c.timers[tm] = struct{}{}
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, ok := c.timers[tm]
		delete(c.timers, tm)
		return ok
	}
}

// Advance moves the clock by d and calls what fell due.
func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []func()
	for tm := range c.timers {
		if !tm.at.After(c.now) {
			due = append(due, tm.f)
			delete(c.timers, tm)
		}
	}
	c.mu.Unlock()
	for _, f := range due {
		f()
	}
}

// diagnose describes the datapath's state, for a failure's message: the
// conntrack entries and the drops.
func (n *passiveNode) diagnose(t *testing.T) string {
	var b strings.Builder
	n.maps.Conntrack.Iterate(func(k bpf.CTKey, v bpf.CTValue) bool {
		fmt.Fprintf(&b, "ct %x:%x -> %x:%x dir=%d backend=%d flags=%d expires=%d\n", k.Src[12:], k.SPort, k.Dst[12:], k.DPort, v.Dir, v.BackendID, v.Flags, v.Expires)
		return true
	})
	n.maps.Drops.Iterate(func(k bpf.DropKey, perCPU []uint64) bool {
		fmt.Fprintf(&b, "drops %+v %v\n", k, perCPU)
		return true
	})
	return b.String()
}
