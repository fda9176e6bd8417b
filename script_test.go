package lbstate_test

import (
	"context"
	"maps"
	"path/filepath"
	"testing"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/hive/script"
	"github.com/cilium/hive/script/scripttest"
	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/reconciler"
	"github.com/lbstate/lbstate/tables"
)

// TestScript runs every testdata/*.txtar script against a fresh hive with
// the whole pipeline: tables, Writer, reconciler and maps (kernel maps
// pinned in a throwaway bpffs directory when the process may create them,
// in-memory maps otherwise; LBSTATE_REQUIRE_BPF=1 demands kernel maps).
// Scripts use statedb's db/* commands and lbstate's lb/* commands.
func TestScript(t *testing.T) {
	if err := bpftest.Available(); err != nil {
		if bpftest.Required() {
			t.Fatalf("kernel BPF maps required (LBSTATE_REQUIRE_BPF=1): %v", err)
		}
		t.Logf("kernel BPF maps unavailable, scripts use in-memory maps: %v", err)
	}
	scripttest.Test(t, context.Background(), newScriptEngine, nil, "testdata/*.txtar")
}

func newScriptEngine(t testing.TB, args []string) *script.Engine {
	log := hivetest.Logger(t)
	h := hive.New(
		statedb.Cell,
		job.Cell,
		cell.SimpleHealthCell,
		tables.Cell,
		bpf.Cell,
		reconciler.Cell,
	)
	mode := "memory"
	pinDir := ""
	if bpftest.Available() == nil {
		mode, pinDir = "kernel", filepath.Join(bpftest.PinDir(t), "maps")
	}
	hive.AddConfigOverride(h, func(c *bpf.ModeConfig) { c.LBMaps = mode })
	hive.AddConfigOverride(h, func(c *bpf.Config) {
		c.LBPinDir = pinDir
		c.LBMaglevTableSize = 251 // small tables keep dumps and tests quick
	})
	cmds, err := h.ScriptCommands(log)
	if err != nil {
		t.Fatalf("ScriptCommands: %v", err)
	}
	maps.Insert(cmds, maps.All(scripttest.DefaultCmds()))
	t.Cleanup(func() {
		if err := h.Stop(log, context.Background()); err != nil {
			t.Errorf("hive stop: %v", err)
		}
	})
	return &script.Engine{Cmds: cmds, Conds: scripttest.DefaultConds()}
}
