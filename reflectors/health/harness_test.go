package health

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lbstate/lbstate/internal/syncbuf"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/tables"
)

// harness runs a checker over real tables, on a fake clock, with its log
// captured. Probes are real: they go to servers the tests start on
// 127.0.0.1.
type harness struct {
	t      *testing.T
	db     *statedb.DB
	w      *tables.Writer
	clock  *fakeClock
	c      *checker
	src    *reflectors.Source
	reg    *prometheus.Registry
	log    *syncbuf.Buffer
	probes chan probeResult

	mu   sync.Mutex
	cond *sync.Cond
	rev  statedb.Revision // of the frontends table, followed by the loop
}

type probeResult struct {
	addr lb.L3n4Addr
	err  error
}

// testConfig: probes every second, 500ms timeout, three failures trip,
// backoff from 1s without jitter: every time in a test is exact.
func testConfig() Config {
	c := DefaultConfig
	c.Health = true
	c.HealthInterval = time.Second
	c.HealthTimeout = 500 * time.Millisecond
	c.HealthBackoffMin = time.Second
	c.HealthBackoffJitter = 0
	return c
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	p, err := cfg.parse()
	if err != nil {
		t.Fatal(err)
	}
	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, db: db, w: w, clock: newFakeClock(), reg: prometheus.NewRegistry(), log: &syncbuf.Buffer{},
		probes: make(chan probeResult, 100)}
	h.cond = sync.NewCond(&h.mu)
	logger := slog.New(slog.NewTextHandler(h.log, &slog.HandlerOptions{Level: slog.LevelInfo,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		}}))
	h.src, err = reflectors.NewSource(w, Source, logger, h.reg)
	if err != nil {
		t.Fatal(err)
	}
	h.c = newChecker(p, h.clock, newMetrics(h.reg))
	h.c.slack = 0 // exact times
	h.c.probed = func(a lb.L3n4Addr, err error) { h.probes <- probeResult{a, err} }
	h.c.iterated = func(rev statedb.Revision) {
		h.mu.Lock()
		h.rev = rev
		h.cond.Broadcast()
		h.mu.Unlock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.c.run(ctx, h.src, db) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("checker: %v", err)
		}
	})
	return h
}

// write runs fn in a write transaction and waits until the checker has
// followed it.
func (h *harness) write(fn func(txn statedb.WriteTxn) error) {
	h.t.Helper()
	txn := h.w.WriteTxn()
	if err := fn(txn); err != nil {
		txn.Abort()
		h.t.Fatal(err)
	}
	rtxn := txn.Commit()
	rev := h.w.Frontends().Revision(rtxn)
	h.mu.Lock()
	defer h.mu.Unlock()
	for h.rev < rev {
		h.cond.Wait()
	}
}

// declare upserts a service with one ClusterIP frontend, its annotations
// and backends (all from the k8s source).
func (h *harness) declare(name string, vip string, annotations map[string]string, backends ...lb.L3n4Addr) {
	h.t.Helper()
	svc := lb.NewServiceName("default", name)
	h.write(func(txn statedb.WriteTxn) error {
		err := h.w.UpsertService(txn, lb.ServiceParams{Name: svc, Source: lb.SourceK8s, Annotations: annotations,
			Frontends: []lb.FrontendParams{{Address: lb.MustParseL3n4Addr(vip), Type: lb.SVCTypeClusterIP}}})
		if err != nil {
			return err
		}
		params := make([]lb.BackendParams, len(backends))
		for i, b := range backends {
			params[i] = lb.BackendParams{Address: b, Weight: lb.DefaultBackendWeight}
		}
		return h.w.SetBackends(txn, svc, lb.SourceK8s, params...)
	})
}

// step advances the clock by d and returns the one probe that falls due.
func (h *harness) step(d time.Duration) probeResult {
	h.t.Helper()
	h.clock.Advance(d)
	return h.nextProbe()
}

// advanceToDue advances the clock to when the backend's next probe is
// due, and returns that time.
func (h *harness) advanceToDue(addr lb.L3n4Addr) time.Time {
	h.t.Helper()
	h.c.mu.Lock()
	t := h.c.cur.targets[addr]
	if t == nil || t.index < 0 {
		h.c.mu.Unlock()
		h.t.Fatalf("backend %s is not waiting for a probe", addr)
	}
	due := h.c.cur.at(t.due)
	h.c.mu.Unlock()
	h.clock.Advance(due.Sub(h.clock.Now()))
	return due
}

func (h *harness) nextProbe() probeResult {
	h.t.Helper()
	select {
	case r := <-h.probes:
		return r
	case <-time.After(10 * time.Second): // a guard, not a wait: probes here take microseconds
		h.t.Fatal("no probe")
		return probeResult{}
	}
}

// verdict waits until the backend's row says healthy (or not) and
// returns it.
func (h *harness) verdict(addr lb.L3n4Addr, healthy bool) *lb.Backend {
	h.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		b, _, watch, found := h.w.Backends().GetWatch(h.db.ReadTxn(), tables.BackendByAddress.Query(addr))
		if found && b.Unhealthy == !healthy {
			return b
		}
		select {
		case <-watch:
		case <-deadline:
			h.t.Fatalf("backend %s: no verdict healthy=%v (found=%v)", addr, healthy, found)
		}
	}
}

// lines returns the log lines that contain substr, with each of the
// replacements applied (random ports, mostly).
func (h *harness) lines(substr string, replace ...string) string {
	var out []string
	r := strings.NewReplacer(replace...)
	for line := range strings.Lines(h.log.String()) {
		if strings.Contains(line, substr) {
			out = append(out, r.Replace(strings.TrimSpace(line)))
		}
	}
	return strings.Join(out, "\n")
}

func (h *harness) metric(c prometheus.Collector) float64 { return testutil.ToFloat64(c) }

// Servers on 127.0.0.1, each on a port the kernel picks.

// refusingAddr is a loopback port nobody listens on: connecting is
// refused.
func refusingAddr(t *testing.T) lb.L3n4Addr {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := tcpAddr(ln.Addr())
	ln.Close()
	return addr
}

// hangingAddr is a listener whose accept queue is full: the kernel drops
// new SYNs, so a connect hangs until its timeout, as to a backend that
// stopped answering.
func hangingAddr(t *testing.T) lb.L3n4Addr {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil { // a queue of one
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := lb.MustParseL3n4Addr(fmt.Sprintf("127.0.0.1:%d/TCP", sa.(*syscall.SockaddrInet4).Port))
	filler, err := net.Dial("tcp", addr.AddrPort().String()) // fills the queue
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { filler.Close() })
	return addr
}

// acceptAndClose serves ln, a backend that accepts connections, until
// the test ends.
func acceptAndClose(t *testing.T, ln net.Listener) {
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
}

func tcpAddr(a net.Addr) lb.L3n4Addr {
	return lb.MustParseL3n4Addr(a.String() + "/TCP")
}

type statedbWriteTxn = statedb.WriteTxn

// testutilCount is how many series of a metric the registry holds.
func testutilCount(h *harness, name string) int {
	n, err := testutil.GatherAndCount(h.reg, name)
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
