package api

import (
	"log/slog"
	"net/http"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
)

const (
	// StateDBPath is where the API serves StateDB's HTTP API.
	StateDBPath = "/statedb/"
	// MapsPath is where the API serves the maps' dump (bpf.DumpHandler).
	MapsPath = "/maps"
)

// Register mounts the API on mux at StateDBPath, MapsPath and
// MaglevTablesPath, within
// DefaultLimits. With nil maps (an agent without lbstate's maps) there is
// no MapsPath, and lbctl says so.
func Register(mux *http.ServeMux, log *slog.Logger, db *statedb.DB, maps *bpf.Maps) {
	DefaultLimits.Register(mux, log, db, maps)
}

// Handler is the API, within DefaultLimits, as one handler that serves
// StateDBPath, MapsPath and MaglevTablesPath. What the agent is
// (AgentPath, MetricsPath) comes from RegisterAgent or AgentHandler.
func Handler(log *slog.Logger, db *statedb.DB, maps *bpf.Maps) http.Handler {
	return DefaultLimits.Handler(log, db, maps)
}

// Register is Register within l.
func (l Limits) Register(mux *http.ServeMux, log *slog.Logger, db *statedb.DB, maps *bpf.Maps) {
	h := l.Handler(log, db, maps) // one handler: the limits are shared
	mux.Handle(StateDBPath, h)
	if maps != nil {
		mux.Handle(MapsPath, h)
		mux.Handle(MaglevTablesPath, h)
	}
}

// Handler is Handler within l.
func (l Limits) Handler(log *slog.Logger, db *statedb.DB, maps *bpf.Maps) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(StateDBPath, http.StripPrefix("/statedb", checkQueries(db, db.HTTPHandler())))
	mux.Handle(StateDBPath+"dump", dumpHandler(db))
	if maps != nil {
		mux.Handle(MapsPath, bpf.DumpHandler(maps))
		mux.Handle(MaglevTablesPath, maglevTables(maps))
	}
	return l.Wrap(log, mux)
}
