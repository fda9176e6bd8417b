package lbstate_test

import (
	"context"
	"maps"
	"testing"

	"github.com/cilium/hive"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/script"
	"github.com/cilium/hive/script/scripttest"
	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/tables"
)

// TestScript runs every testdata/*.txtar script against a fresh hive with
// the lbstate cells, statedb's db/* commands and lbstate's lb/* commands.
func TestScript(t *testing.T) {
	scripttest.Test(t, context.Background(), newScriptEngine, nil, "testdata/*.txtar")
}

func newScriptEngine(t testing.TB, args []string) *script.Engine {
	log := hivetest.Logger(t)
	h := hive.New(statedb.Cell, tables.Cell)
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
