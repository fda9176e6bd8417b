package lbstate_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/spf13/pflag"

	"github.com/lbstate/lbstate"
	"github.com/lbstate/lbstate/internal/syncbuf"
	"github.com/lbstate/lbstate/lb"
)

// Each part of the group brings its cells' flags, and Core none of the
// sources' or the datapath's: an agent of Core and its own source has no
// --manifests that would do nothing.
func TestCellComposesEveryPart(t *testing.T) {
	core := []string{"lb-maps", "lb-pin-dir", "lb-maglev-table-size", "lb-algorithm"}
	datapath := []string{"lb-datapath", "lb-cgroup", "lb-devices"}
	sources := []string{"k8s-node-name", "manifests", "route-status", "health", "cluster-name", "clustermesh-config"}
	for _, c := range []struct {
		name          string
		cell          cell.Cell
		with, without []string
	}{
		{"Cell", lbstate.Cell, append(append(append([]string{}, core...), datapath...), sources...), nil},
		{"Core", lbstate.Core, core, append(append([]string{}, datapath...), sources...)},
		{"Core+Datapath", cell.Group(lbstate.Core, lbstate.Datapath), append(append([]string{}, core...), datapath...), sources},
		{"Core+Sources", cell.Group(lbstate.Core, lbstate.Sources), append(append([]string{}, core...), sources...), datapath},
	} {
		flags := pflag.NewFlagSet(c.name, pflag.ContinueOnError)
		hive.New(c.cell).RegisterFlags(flags)
		for _, f := range c.with {
			if flags.Lookup(f) == nil {
				t.Errorf("%s has no --%s", c.name, f)
			}
		}
		for _, f := range c.without {
			if flags.Lookup(f) != nil {
				t.Errorf("%s has --%s", c.name, f)
			}
		}
	}
}

// The whole agent given no configuration but in-memory maps starts, runs
// no source, attaches nothing, logs no warning and stops: what is not
// configured does nothing.
func TestCellWithoutConfigurationDoesNothing(t *testing.T) {
	var logs syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var (
		db        *statedb.DB
		frontends statedb.Table[*lb.Frontend]
	)
	h := hive.New(lbstate.Cell, cell.Invoke(func(d *statedb.DB, fes statedb.Table[*lb.Frontend]) { db, frontends = d, fes }))
	flags := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	h.RegisterFlags(flags)
	if err := flags.Parse([]string{"--lb-maps", "memory"}); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(log, context.Background()); err != nil {
		t.Fatal(err)
	}
	// No source registered an initializer, so the tables are initialized.
	_, initialized := frontends.Initialized(db.ReadTxn())
	select {
	case <-initialized:
	case <-time.After(10 * time.Second):
		t.Error("the frontends table was not initialized in 10s: a source that should do nothing is waited for")
	}
	if n := frontends.NumObjects(db.ReadTxn()); n != 0 {
		t.Errorf("%d frontends without a source", n)
	}
	if err := h.Stop(log, context.Background()); err != nil {
		t.Fatal(err)
	}
	if logs.String() != "" {
		t.Errorf("warnings without configuration:\n%s", logs.String())
	}
}
