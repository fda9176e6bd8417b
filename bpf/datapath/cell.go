// Package datapath runs lbstate's reference datapath (bpf.Datapath) in an
// agent: Cell attaches its programs where the flags say, and nowhere by
// default (--lb-datapath none), detaches them when the agent stops, and
// exports the traffic it counts (lb_counters, lb_drops) as Prometheus
// metrics per frontend and backend. While the datapath is attached, a
// garbage collector deletes expired conntrack entries (ctGC).
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

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/metrics"
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
	p.Lifecycle.Append(cell.Hook{
		OnStart: func(cell.HookContext) (err error) {
			dp, err = attach(p.Config, p.Maps)
			if err != nil {
				return err
			}
			p.Log.Info("Attached the reference datapath", "mode", p.Config.LBDatapath,
				"cgroup", p.Config.cgroup(), "devices", p.Config.LBDevices, "workload-devices", p.Config.LBWorkloadDevices)
			if p.Config.socket() {
				gc.reapUDP = dp.DestroyOrphanedUDPSockets
			}
			var ctx context.Context
			ctx, stopGC = context.WithCancel(context.Background())
			gcDone = make(chan struct{})
			go func() {
				defer close(gcDone)
				gc.run(ctx)
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

// attach loads the datapath and attaches it as cfg says; on error,
// nothing stays attached.
func attach(cfg Config, maps *bpf.Maps) (*bpf.Datapath, error) {
	dp, err := bpf.LoadDatapathOptions(maps, bpf.DatapathOptions{CTTimeouts: cfg.ctTimeouts()})
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
