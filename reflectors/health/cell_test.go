package health

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/spf13/pflag"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/metrics"
	"github.com/lbstate/lbstate/tables"
)

type hiveParts struct {
	rep Reporter
	db  *statedb.DB
	fes statedb.Table[*lb.Frontend]
	reg *prometheus.Registry
}

// startHive starts tables, metrics and health checking with args as the
// flags, on a fake clock.
func startHive(t *testing.T, args ...string) hiveParts {
	t.Helper()
	var p hiveParts
	h := hive.New(statedb.Cell, job.Cell, cell.SimpleHealthCell, metrics.Cell, tables.Cell, Cell,
		cell.Provide(func() Clock { return newFakeClock() }),
		cell.Invoke(func(r Reporter, d *statedb.DB, f statedb.Table[*lb.Frontend], reg *prometheus.Registry) {
			p = hiveParts{r, d, f, reg}
		}))
	flags := pflag.NewFlagSet("test", pflag.ContinueOnError)
	h.RegisterFlags(flags)
	if err := flags.Parse(args); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	if err := h.Start(log, context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Stop(log, context.Background()) })
	return p
}

// Off by default: the Reporter ignores reports and no source waits to
// sync. With --health the checker is the Reporter, syncs at once, and
// counts in the hive's registry.
func TestCellOffByDefaultOnWithFlag(t *testing.T) {
	off := startHive(t)
	if _, ok := off.rep.(nopReporter); !ok {
		t.Errorf("Reporter without --health is %T", off.rep)
	}
	if init, _ := off.fes.Initialized(off.db.ReadTxn()); !init {
		t.Error("tables not initialized: a disabled checker registered as a source")
	}

	on := startHive(t, "--health", "--health-interval", "2s")
	if _, ok := on.rep.(*checker); !ok {
		t.Errorf("Reporter with --health is %T", on.rep)
	}
	_, initialized := on.fes.Initialized(on.db.ReadTxn())
	select {
	case <-initialized: // the checker synced
	case <-time.After(10 * time.Second):
		t.Fatal("tables not initialized: the checker did not sync")
	}
	on.rep.ReportConnection(lb.MustParseL3n4Addr("127.0.0.1:80/TCP"), nil) // not checked: no frontend lists it
	want := `# HELP lbstate_health_passive_reports_total Connections reported through the passive interface, by result (success, failure, ignored: a backend not checked here)
# TYPE lbstate_health_passive_reports_total counter
lbstate_health_passive_reports_total{result="failure"} 0
lbstate_health_passive_reports_total{result="ignored"} 1
lbstate_health_passive_reports_total{result="success"} 0
`
	if err := testutil.GatherAndCompare(on.reg, strings.NewReader(want), "lbstate_health_passive_reports_total"); err != nil {
		t.Error(err)
	}
}

// A flag value out of range stops the hive from starting, naming the
// flag.
func TestCellRejectsBadFlags(t *testing.T) {
	h := hive.New(statedb.Cell, job.Cell, cell.SimpleHealthCell, tables.Cell, Cell)
	flags := pflag.NewFlagSet("test", pflag.ContinueOnError)
	h.RegisterFlags(flags)
	if err := flags.Parse([]string{"--health", "--health-backoff-jitter", "1.5"}); err != nil {
		t.Fatal(err)
	}
	err := h.Start(slog.New(slog.DiscardHandler), context.Background())
	if err == nil || !containsAll(err.Error(), "--health-backoff-jitter", "1.5") {
		t.Errorf("start: %v", err)
	}
}
