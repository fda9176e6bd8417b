package reflectors_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lbstate/lbstate/internal/healthlog"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/metrics"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/tables"
)

// testSource is the identity of the sources these tests start.
var testSource = lb.MustRegisterSource("test", 30)

// startSource runs a hive with the tables, the registry and one source
// "test" whose body is run.
func startSource(t *testing.T, run reflectors.RunFunc) (*statedb.DB, statedb.Table[*lb.Frontend], *prometheus.Registry, *healthlog.Log) {
	t.Helper()
	return startLoggedSource(t, run, slog.DiscardHandler)
}

// startLoggedSource is startSource logging to logTo.
func startLoggedSource(t *testing.T, run reflectors.RunFunc, logTo slog.Handler) (*statedb.DB, statedb.Table[*lb.Frontend], *prometheus.Registry, *healthlog.Log) {
	t.Helper()
	var (
		db  *statedb.DB
		fes statedb.Table[*lb.Frontend]
		reg *prometheus.Registry
	)
	health := &healthlog.Log{}
	h := hive.New(
		statedb.Cell, job.Cell, metrics.Cell, tables.Cell,
		cell.Provide(health.Health),
		cell.Invoke(func(p reflectors.Params) error { return reflectors.Register(p, testSource, run) }),
		cell.Invoke(func(d *statedb.DB, f statedb.Table[*lb.Frontend], r *prometheus.Registry) { db, fes, reg = d, f, r }),
	)
	log := slog.New(logTo)
	if err := h.Start(log, context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Stop(log, context.Background()) })
	return db, fes, reg, health
}

func synced(reg *prometheus.Registry) float64 { return gauge(reg, "lbstate_source_synced") }

// gauge is source test's value of the gauge family name, or -1 when it
// has no such series.
func gauge(reg *prometheus.Registry, name string) float64 {
	families, _ := reg.Gather()
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "source" && l.GetValue() == "test" {
						return m.GetGauge().GetValue()
					}
				}
			}
		}
	}
	return -1
}

// A registered source holds the tables uninitialized (so nothing is
// pruned) until it calls Synced; then its health is OK and its synced
// gauge 1.
func TestTablesInitializedOnlyOnceSourceSynced(t *testing.T) {
	release := make(chan struct{})
	db, fes, reg, health := startSource(t, func(ctx context.Context, s *reflectors.Source) error {
		select {
		case <-release:
		case <-ctx.Done():
			return nil
		}
		s.Synced()
		<-ctx.Done()
		return nil
	})
	_, initialized := fes.Initialized(db.ReadTxn())
	select {
	case <-initialized:
		t.Fatal("tables initialized before the source synced")
	case <-time.After(50 * time.Millisecond):
	}
	if got := synced(reg); got != 0 {
		t.Fatalf("lbstate_source_synced = %v before Synced, want 0", got)
	}
	close(release)
	select {
	case <-initialized:
	case <-time.After(5 * time.Second):
		t.Fatal("tables not initialized after the source synced")
	}
	for deadline := time.Now().Add(5 * time.Second); health.Last() != "OK Synced" && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if got := health.Last(); got != "OK Synced" {
		t.Fatalf("health %q, want OK Synced", got)
	}
	if got := synced(reg); got != 1 {
		t.Fatalf("lbstate_source_synced = %v, want 1", got)
	}
}

// A source that fails is reported degraded, with its error, and run
// again; bad input it rejects is counted in lbstate_source_errors_total.
func TestFailingSourceIsDegradedAndRetried(t *testing.T) {
	var (
		mu    sync.Mutex
		calls int
		src   *reflectors.Source
	)
	db, fes, reg, health := startSource(t, func(ctx context.Context, s *reflectors.Source) error {
		mu.Lock()
		calls++
		first := calls == 1
		src = s
		mu.Unlock()
		if first {
			return errors.New("cannot reach the world")
		}
		s.Reject(tables.Invalidf("service default/x", "port", "bad"))
		s.Synced()
		<-ctx.Done()
		return nil
	})
	_, initialized := fes.Initialized(db.ReadTxn())
	select {
	case <-initialized:
	case <-time.After(10 * time.Second):
		t.Fatal("the source was not retried after failing")
	}
	reports := fmt.Sprint(health.All())
	if want := "cannot reach the world"; !containsPart(health, want) {
		t.Fatalf("health reports %s, want %q", reports, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if src.Errors() != 1 {
		t.Fatalf("Errors() = %d, want 1", src.Errors())
	}
	if n, err := testutil.GatherAndCount(reg, "lbstate_source_errors_total"); err != nil || n != 1 {
		t.Fatalf("lbstate_source_errors_total series: %d, %v", n, err)
	}
}

func containsPart(h *healthlog.Log, s string) bool {
	for _, r := range h.All() {
		if strings.HasPrefix(r, "Degraded") && strings.Contains(r, s) {
			return true
		}
	}
	return false
}

// Two sources share the metric families of one registry, each with its
// own label.
func TestSourcesShareMetricFamilies(t *testing.T) {
	reg := prometheus.NewRegistry()
	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []lb.Source{lb.MustRegisterSource("a", 31), lb.MustRegisterSource("b", 32)} {
		name := src.String()
		s, err := reflectors.NewSource(w, src, slog.New(slog.DiscardHandler), reg)
		if err != nil {
			t.Fatal(err)
		}
		s.Reject(tables.AsInvalid(errors.New(name)))
	}
	if n, err := testutil.GatherAndCount(reg, "lbstate_source_errors_total"); err != nil || n != 2 {
		t.Fatalf("lbstate_source_errors_total series: %d, %v; want one per source", n, err)
	}
}

// Reject counts only invalid input: any other error (which the source
// must return instead, its transaction aborted) is logged at ERROR as
// the source's bug and counted nowhere, so that the errors metric means
// what it says.
func TestRejectCountsOnlyInvalidInput(t *testing.T) {
	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	s, err := reflectors.NewSource(w, testSource, slog.New(slog.NewTextHandler(&logged, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Reject(fmt.Errorf("writing: %w", statedb.ErrTableNotLockedForWriting)) {
		t.Error("Reject of an internal error reported true")
	}
	if s.Reject(nil) {
		t.Error("Reject(nil) reported true")
	}
	if n := s.Errors(); n != 0 {
		t.Fatalf("Errors() = %d after rejecting no invalid input", n)
	}
	if !strings.Contains(logged.String(), "level=ERROR") {
		t.Errorf("an internal error given to Reject was not logged at ERROR:\n%s", logged.String())
	}
	if !s.Reject(fmt.Errorf("manifest a.yaml: %w", tables.Invalidf("service default/web", `port "http"`, "unknown protocol %q", "TPC"))) {
		t.Error("Reject of invalid input reported false")
	}
	if n := s.Errors(); n != 1 {
		t.Errorf("Errors() = %d, want 1", n)
	}
}

// A source writes as its registered identity: NewSource hands it back as
// ID, named as registered, and refuses a value nobody registered.
func TestSourceIsItsRegisteredIdentity(t *testing.T) {
	w, err := tables.New(statedb.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := reflectors.NewSource(w, testSource, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.ID() != testSource || s.Name() != "test" {
		t.Errorf("ID %v, name %q; want %v, \"test\"", s.ID(), s.Name(), testSource)
	}
	if _, err := reflectors.NewSource(w, lb.Source(7), slog.New(slog.DiscardHandler), nil); err == nil || !strings.Contains(err.Error(), "source(7): not registered") {
		t.Errorf("an unregistered source: %v", err)
	}
}
