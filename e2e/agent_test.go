package e2e

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/lbstate/lbstate"
	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors/kubeapi"
)

// agent is lbstate composed as the example agent composes it
// (lbstate.Cell: its sources, tables, reconciler, kernel maps and the
// reference datapath), run in the test process against the test's API
// server, with the datapath attached to the test's node.
type agent struct {
	t         testing.TB
	h         *hive.Hive
	log       *slog.Logger
	logs      *logBuffer
	db        *statedb.DB
	frontends statedb.Table[*lb.Frontend]
	maps      *bpf.Maps
	registry  *prometheus.Registry
	health    *cell.SimpleHealth
	stopped   bool
}

// startAgent starts an agent for the node n of cluster c, with the
// datapath on n and extra flags after the suite's.
func (n *node) startAgent(c *cluster, extra ...string) *agent {
	n.t.Helper()
	a := &agent{t: n.t, logs: &logBuffer{}}
	a.log = slog.New(slog.NewTextHandler(a.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	klog.SetSlogLogger(a.log.With("component", "client-go")) // client-go's lines in the agent's log
	clients := kubeClients(n.t, c)
	a.h = hive.New(
		lbstate.Cell,
		cell.Provide(func() kubeapi.Clients { return clients }),
		cell.Invoke(func(db *statedb.DB, fes statedb.Table[*lb.Frontend], maps *bpf.Maps, reg *prometheus.Registry, health *cell.SimpleHealth) {
			a.db, a.frontends, a.maps, a.registry, a.health = db, fes, maps, reg, health
		}),
	)
	flags := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	a.h.RegisterFlags(flags)
	args := append([]string{
		"--k8s-node-name=" + n.name,
		"--lb-maps=kernel",
		"--lb-pin-dir=" + filepath.Join(bpftest.PinDir(n.t), "maps"),
		"--lb-datapath=both",
		"--lb-cgroup=" + n.cg,
		"--lb-devices=" + externalDev,
		"--lb-workload-devices=" + clientDev,
	}, extra...)
	check(n.t, flags.Parse(args))
	n.t.Cleanup(func() {
		a.stop()
		if n.t.Failed() {
			n.t.Logf("the agent's log:\n%s", a.logs.String())
		}
	})
	n.diagnoseOnFailure()
	// The datapath finds the node's interfaces in the namespace of the
	// thread that starts the hive; its goroutines (the API clients among
	// them) run in the test process's namespace.
	check(n.t, n.ns.Do(func() error { return a.h.Start(a.log, context.Background()) }))
	n.agent = a // started: its maps are there to diagnose
	return a
}

func (a *agent) stop() {
	if a.stopped {
		return
	}
	a.stopped = true
	if err := a.h.Stop(a.log, context.Background()); err != nil {
		a.t.Errorf("stopping the agent: %v", err)
	}
}

// kubeClients are the agent's clients of c's API server, built as the
// example agent builds them.
func kubeClients(t testing.TB, c *cluster) kubeapi.Clients {
	t.Helper()
	clients, err := kubeapi.NewClients(c.api.cfg)
	check(t, err)
	return clients
}

// frontend returns the frontend at addr (e.g. "10.96.0.10:80/TCP").
func (a *agent) frontend(addr string) (*lb.Frontend, bool) {
	l3n4, err := lb.ParseL3n4Addr(addr)
	if err != nil {
		a.t.Fatal(err)
	}
	for fe := range a.frontends.All(a.db.ReadTxn()) {
		if fe.Address == l3n4 {
			return fe, true
		}
	}
	return nil, false
}

// waitFrontend waits until the frontend at addr is in the maps (its
// status Done) with exactly the backends that take new flows given by
// want ("10.244.0.1:8080", ...; none for a frontend without backends).
func (a *agent) waitFrontend(addr string, timeout time.Duration, want ...string) {
	a.t.Helper()
	slices.Sort(want)
	a.waitFrontendFunc(addr, timeout, func(fe *lb.Frontend) error {
		if got := activeBackends(fe); !slices.Equal(got, want) {
			return fmt.Errorf("backends taking new flows %v, want %v", got, want)
		}
		return nil
	})
}

// waitFrontendFunc waits until the frontend at addr is in the maps (its
// status Done) and cond accepts it.
func (a *agent) waitFrontendFunc(addr string, timeout time.Duration, cond func(*lb.Frontend) error) {
	a.t.Helper()
	eventually(a.t, timeout, func() error {
		fe, ok := a.frontend(addr)
		if !ok {
			return fmt.Errorf("no frontend %s", addr)
		}
		if err := cond(fe); err != nil {
			return fmt.Errorf("frontend %s: %w", addr, err)
		}
		if fe.Status.Kind != reconciler.StatusKindDone {
			return fmt.Errorf("frontend %s: status %s", addr, fe.Status.Kind)
		}
		return nil
	})
}

// waitNoFrontend waits until nothing is at addr.
func (a *agent) waitNoFrontend(addr string, timeout time.Duration) {
	a.t.Helper()
	eventually(a.t, timeout, func() error {
		if _, ok := a.frontend(addr); ok {
			return fmt.Errorf("frontend %s still there", addr)
		}
		return nil
	})
}

// activeBackends are the addresses (ip:port) of a frontend's backends
// that take new flows, sorted.
func activeBackends(fe *lb.Frontend) []string {
	var out []string
	for _, b := range fe.Backends {
		if b.Weight > 0 {
			out = append(out, b.Address.AddrPort().String())
		}
	}
	slices.Sort(out)
	return out
}

// metric returns the value of a gauge or counter family name with the
// given label values (name=value pairs), or -1 if there is none.
func (a *agent) metric(name string, labels ...string) float64 {
	a.t.Helper()
	fams, err := a.registry.Gather()
	check(a.t, err)
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if labelValue(m, labels[i]) != labels[i+1] {
					continue next
				}
			}
			switch {
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Counter != nil:
				return m.Counter.GetValue()
			}
		}
	}
	return -1
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// wantHealth waits until the health of the job named job (a source's
// job is named after the source) is at level.
func (a *agent) wantHealth(job string, level cell.Level) {
	a.t.Helper()
	scope := "job-" + job // hive scopes a job's health by its name alone
	eventually(a.t, 10*time.Second, func() error {
		h := a.health.GetChild(scope)
		if h == nil {
			return fmt.Errorf("no health reported at %s", scope)
		}
		h.Lock()
		defer h.Unlock()
		if h.Level != level {
			return fmt.Errorf("health of %s: %s (%s, %v), want %s", scope, h.Level, h.Status, h.Error, level)
		}
		return nil
	})
}

// logBuffer keeps an agent's log for the test to read and to print when
// it fails.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// count counts the log lines that contain every one of parts.
func (b *logBuffer) count(parts ...string) int {
	n := 0
	for line := range strings.Lines(b.String()) {
		if all(line, parts) {
			n++
		}
	}
	return n
}

func all(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
