package datapath_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/datapath"
	"github.com/lbstate/lbstate/tables"
)

// A configuration that cannot work fails the agent's start with an error
// naming the flag, before anything is attached; the default attaches
// nothing and needs nothing.
func TestDatapathFlagsAreCheckedBeforeAttaching(t *testing.T) {
	memory, err := bpf.NewMemoryMaps(bpf.DefaultConfig, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		cfg  datapath.Config
		maps *bpf.Maps
		want string // "" for success
	}{
		{"default", datapath.DefaultConfig, memory, ""},
		{"unknown mode", datapath.Config{LBDatapath: "xdp"}, memory, `--lb-datapath "xdp": want none, socket, tc or both`},
		{"memory maps", datapath.Config{LBDatapath: "tc", LBDevices: []string{"eth0"}}, memory, "--lb-datapath tc needs kernel maps"},
		{"no devices", datapath.Config{LBDatapath: "tc"}, nil, "give the interfaces with --lb-devices"},
		{"not cgroup2", datapath.Config{LBDatapath: "socket", LBCgroup: t.TempDir()}, nil, "not a cgroup v2 directory"},
		{"no cgroup", datapath.Config{LBDatapath: "both", LBCgroup: "/nonexistent"}, nil, "--lb-cgroup /nonexistent"},
	} {
		t.Run(c.name, func(t *testing.T) {
			maps := c.maps
			if maps == nil {
				maps = kernelMaps(t, 0)
			}
			h := hive.New(
				statedb.Cell, job.Cell, cell.SimpleHealthCell, tables.Cell,
				cell.Provide(func() *bpf.Maps { return maps }),
				datapath.Cell,
			)
			hive.AddConfigOverride(h, func(cfg *datapath.Config) { *cfg = c.cfg })
			log := hivetest.Logger(t, hivetest.LogLevel(slog.LevelError))
			err := h.Start(log, context.Background())
			if err == nil {
				h.Stop(log, context.Background())
			}
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("start: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("start: %v, want an error saying %q", err, c.want)
			}
		})
	}
}
