package tables

import (
	"log/slog"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
)

// Cell provides the load-balancing tables (read-only views for everyone,
// statedb.Table[*lb.Service] and friends), the *Writer that changes them,
// and the lb/* script commands. It needs statedb.Cell.
var Cell = cell.Module(
	"lb-tables",
	"Load-balancing tables and their Writer",

	cell.ProvidePrivate(NewTables),
	cell.Provide(
		func(db *statedb.DB, t *Tables, log *slog.Logger) *Writer { return NewWriter(db, t, log) },
		func(t *Tables) statedb.Table[*lb.Service] { return t.Services },
		func(t *Tables) statedb.Table[*lb.Frontend] { return t.Frontends },
		// The writable frontends table is for a reconciler's status
		// write-back (statedb/reconciler needs it); sources use the Writer.
		func(t *Tables) statedb.RWTable[*lb.Frontend] { return t.Frontends },
		func(t *Tables) statedb.Table[*lb.Backend] { return t.Backends },
		func(t *Tables) statedb.Table[*lb.Node] { return t.Node },
		func(w *Writer) hive.ScriptCmdsOut { return hive.NewScriptCmds(ScriptCommands(w)) },
	),
)
