package datapath_test

import (
	"context"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	statedbreconciler "github.com/cilium/statedb/reconciler"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/bpf/datapath"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/metrics"
	"github.com/lbstate/lbstate/reconciler"
	"github.com/lbstate/lbstate/tables"
)

func TestMain(m *testing.M) {
	bpftest.MaybeClient() // when the process is a test's client, it ends here
	bpftest.Main(m)
}

// agent is the pipeline (Writer, tables, reconciler) over kernel maps, with
// datapath.Cell.
type agent struct {
	t         testing.TB
	h         *hive.Hive
	log       *slog.Logger
	db        *statedb.DB
	w         *tables.Writer
	frontends statedb.Table[*lb.Frontend]
	rec       statedbreconciler.Reconciler[*lb.Frontend]
	registry  *prometheus.Registry
	maps      *bpf.Maps
}

// newAgent builds the agent over maps with the datapath configured by dp.
func newAgent(t testing.TB, maps *bpf.Maps, dp datapath.Config) *agent {
	a := &agent{t: t, maps: maps, log: hivetest.Logger(t, hivetest.LogLevel(slog.LevelWarn))}
	a.h = hive.New(
		statedb.Cell, job.Cell, cell.SimpleHealthCell, metrics.Cell, tables.Cell,
		cell.Provide(func() *bpf.Maps { return maps }),
		reconciler.Cell,
		datapath.Cell,
		cell.Invoke(func(db *statedb.DB, w *tables.Writer, fes statedb.Table[*lb.Frontend],
			r statedbreconciler.Reconciler[*lb.Frontend], reg *prometheus.Registry) {
			a.db, a.w, a.frontends, a.rec, a.registry = db, w, fes, r, reg
		}),
	)
	hive.AddConfigOverride(a.h, func(c *datapath.Config) { *c = dp })
	if err := a.h.Populate(a.log); err != nil {
		t.Fatal(err)
	}
	return a
}

func (a *agent) start() {
	a.t.Helper()
	if err := a.h.Start(a.log, context.Background()); err != nil {
		a.t.Fatal(err)
	}
}

func (a *agent) stop() {
	a.t.Helper()
	if err := a.h.Stop(a.log, context.Background()); err != nil {
		a.t.Fatal(err)
	}
}

// write runs fn in a write transaction and waits until the maps hold the
// result.
func (a *agent) write(fn func(txn statedb.WriteTxn) error) {
	a.t.Helper()
	txn := a.w.WriteTxn()
	defer txn.Abort()
	if err := fn(txn); err != nil {
		a.t.Fatal(err)
	}
	txn.Commit()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := reconciler.WaitReconciled(ctx, a.rec, a.frontends.Revision(a.db.ReadTxn())); err != nil {
		a.t.Fatal(err)
	}
}

// service declares test/name with frontends at addrs and exactly the
// given backends.
func (a *agent) service(name string, alg lb.Algorithm, addrs []string, bes ...lb.BackendParams) {
	a.t.Helper()
	n := lb.NewServiceName("test", name)
	var fes []lb.FrontendParams
	for _, s := range addrs {
		fes = append(fes, lb.FrontendParams{Address: lb.MustParseL3n4Addr(s), Type: lb.SVCTypeClusterIP})
	}
	a.write(func(txn statedb.WriteTxn) error {
		if err := a.w.UpsertService(txn, lb.ServiceParams{Name: n, Source: lb.SourceK8s, Algorithm: alg, Frontends: fes}); err != nil {
			return err
		}
		return a.w.SetBackends(txn, n, lb.SourceK8s, bes...)
	})
}

// frontend returns the frontend row at addr.
func (a *agent) frontend(addr string) *lb.Frontend {
	a.t.Helper()
	fe, _, ok := a.frontends.Get(a.db.ReadTxn(), tables.FrontendByAddress.Query(lb.MustParseL3n4Addr(addr)))
	if !ok {
		a.t.Fatalf("no frontend %s", addr)
	}
	return fe
}

// be is a backend at s of the given weight.
func be(s string, weight uint16) lb.BackendParams {
	return lb.BackendParams{Address: lb.MustParseL3n4Addr(s), Weight: weight}
}

// kernelMaps returns kernel maps of the test's own with Maglev tables of
// size m (0 for the default).
func kernelMaps(t testing.TB, m uint32) *bpf.Maps {
	cfg := bpftest.Config(t)
	if m != 0 {
		cfg.LBMaglevTableSize = m
	}
	return bpftest.KernelMaps(t, cfg)
}

// loadDatapath loads the datapath over maps, for tests that run its
// programs themselves.
func loadDatapath(t testing.TB, maps *bpf.Maps) *bpf.Datapath {
	t.Helper()
	d, err := bpf.LoadDatapath(maps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func addrPort(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
