package tables

import (
	"log/slog"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
)

// Cell provides the load-balancing tables, read-only
// (statedb.Table[*lb.Service] and friends), the *Writer that changes them,
// ReconcilerFrontends for the reconciler's status write-back, and the lb/*
// script commands; with metrics.Cell, lbstate_topology_* in its registry.
// After changes it releases what StateDB keeps of the tables' past
// (Writer.ReleaseDeleted). It needs statedb.Cell.
var Cell = cell.Module(
	"lb-tables",
	"Load-balancing tables and their Writer",

	cell.Config(DefaultHistoryConfig),
	cell.ProvidePrivate(newTableSet),
	cell.Provide(
		func(db *statedb.DB, t *tableSet, log *slog.Logger, hc HistoryConfig) *Writer {
			return newWriter(db, t, log, hc)
		},
		func(t *tableSet) statedb.Table[*lb.Service] { return t.services },
		func(t *tableSet) statedb.Table[*lb.Frontend] { return t.frontends },
		func(t *tableSet) ReconcilerFrontends { return ReconcilerFrontends{t.frontends} },
		func(t *tableSet) statedb.Table[*lb.Backend] { return t.backends },
		func(t *tableSet) statedb.Table[*lb.Node] { return t.node },
		func(t *tableSet) statedb.Table[*lb.NodeLabels] { return t.nodeLabels },
		func(t *tableSet) statedb.Table[*RegisteredSource] { return t.sources },
		func(w *Writer) hive.ScriptCmdsOut { return hive.NewScriptCmds(ScriptCommands(w)) },
	),
	cell.Invoke(registerMetrics),
	cell.Invoke(startReleasing), // release.go
)
