// Package datapath runs lbstate's reference datapath (bpf.Datapath) in an
// agent: Cell attaches its programs where the flags say, and nowhere by
// default (--lb-datapath none), detaches them when the agent stops, and
// exports the traffic it counts (lb_counters, lb_drops) as Prometheus
// metrics per frontend and backend. While the datapath is attached, a
// garbage collector deletes expired conntrack entries (ctGC). With
// health.Cell and --health-passive, the programs also report how each
// TCP connection they balance begins (lb_sock_ops with the socket
// programs; the conntrack state at tc), and connReports hands the
// reports to health.Passive: passive failure accrual.
//
// Attaching is the one thing in lbstate that changes how the host's own
// traffic flows: socket programs act on every process of --lb-cgroup and
// its descendants, tc programs on every packet of --lb-devices.
package datapath

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/metrics"
	"github.com/lbstate/lbstate/reflectors/health"
)

// Cell attaches the reference datapath (see Config) and registers its
// metrics. It needs bpf.Cell and tables.Cell; with metrics.Cell the
// metrics are served.
var Cell = cell.Module(
	"lb-datapath",
	"Reference datapath programs and traffic metrics",

	cell.Config(DefaultConfig),
	cell.Invoke(register),
)

type params struct {
	cell.In

	Lifecycle  cell.Lifecycle
	Log        *slog.Logger
	Config     Config
	Maps       *bpf.Maps
	DB         *statedb.DB
	Frontends  statedb.Table[*lb.Frontend]
	Registerer prometheus.Registerer `optional:"true"`
	// Passive, with --health-passive, takes the connections' outcomes.
	Passive *health.Passive `optional:"true"`
}

func register(p params) error {
	if err := p.Config.validate(p.Maps); err != nil {
		return err
	}
	metrics.Register(p.Registerer, newCollector(p.Maps, p.DB, p.Frontends))
	if p.Config.LBDatapath == ModeNone {
		return nil
	}
	var (
		dp     *bpf.Datapath
		stopGC context.CancelFunc
		gcDone chan struct{}
	)
	gc := newCTGC(p.Maps, p.Log, p.Config.gcInterval(), p.Registerer)
	var reports *connReports
	if p.Passive != nil {
		reports = newConnReports(p.Passive, p.Log, p.Registerer)
	}
	p.Lifecycle.Append(cell.Hook{
		OnStart: func(cell.HookContext) (err error) {
			dp, err = attach(p.Config, p.Maps, reports != nil)
			if err != nil {
				return err
			}
			var r *bpf.ConnReader
			if reports != nil {
				if r, err = dp.ConnectionReports(); err != nil {
					dp.Close()
					dp = nil
					return err
				}
			}
			p.Log.Info("Attached the reference datapath", "mode", p.Config.LBDatapath,
				"cgroup", p.Config.cgroup(), "devices", p.Config.LBDevices, "workload-devices", p.Config.LBWorkloadDevices,
				"connection_reports", r != nil)
			gc.dp = dp
			if p.Config.socket() {
				gc.reapUDP = dp.DestroyOrphanedUDPSockets
			}
			var ctx context.Context
			ctx, stopGC = context.WithCancel(context.Background())
			gcDone = make(chan struct{})
			go func() {
				defer close(gcDone)
				var wg sync.WaitGroup
				if r != nil {
					wg.Go(func() { reports.run(ctx, r) })
				}
				gc.run(ctx)
				wg.Wait()
			}()
			return nil
		},
		OnStop: func(cell.HookContext) error {
			if dp == nil {
				return nil
			}
			stopGC()
			<-gcDone
			p.Log.Info("Detaching the reference datapath")
			return dp.Close()
		},
	})
	return nil
}

// attach loads the datapath and attaches it as cfg says, reporting
// connections' outcomes if reports; on error, nothing stays attached.
func attach(cfg Config, maps *bpf.Maps, reports bool) (*bpf.Datapath, error) {
	dp, err := bpf.LoadDatapathOptions(maps, bpf.DatapathOptions{CTTimeouts: cfg.ctTimeouts(), ConnectionReports: reports})
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*bpf.Datapath, error) {
		dp.Close()
		return nil, err
	}
	if cfg.socket() {
		if err := dp.AttachCgroup(cfg.LBCgroup); err != nil {
			return fail(fmt.Errorf("--lb-cgroup %s: %w", cfg.LBCgroup, err))
		}
	}
	if cfg.tc() {
		for _, d := range []struct {
			names    []string
			workload bool
		}{{cfg.LBDevices, false}, {cfg.LBWorkloadDevices, true}} {
			for _, name := range d.names {
				iface, err := net.InterfaceByName(name)
				if err != nil {
					return fail(fmt.Errorf("--lb-devices: %s: %w", name, err))
				}
				if err := dp.AttachTC(iface.Index, d.workload); err != nil {
					return fail(fmt.Errorf("--lb-devices: %s: %w", name, err))
				}
			}
		}
	}
	return dp, nil
}
