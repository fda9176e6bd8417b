package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/metrics"
)

// mapsPath is where the API serves the maps' dump (what lbctl maps and
// explain read when the maps are not pinned where they can open them).
const mapsPath = "/maps"

// serveAPI serves StateDB's HTTP API under /statedb/ and the maps' dump
// at mapsPath, within defaultAPILimits.
func serveAPI(lc cell.Lifecycle, log *slog.Logger, addr string, db *statedb.DB, maps *bpf.Maps) {
	serve(lc, log, addr, "API", apiHandler(log, defaultAPILimits, db, maps))
}

// apiHandler is the API's handler.
func apiHandler(log *slog.Logger, limits apiLimits, db *statedb.DB, maps *bpf.Maps) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/statedb/", http.StripPrefix("/statedb", checkQueries(db, db.HTTPHandler())))
	mux.Handle(mapsPath, bpf.DumpHandler(maps))
	return limits.limit(log, mux)
}

// serveMetrics serves what g gathers at /metrics.
func serveMetrics(lc cell.Lifecycle, log *slog.Logger, addr string, g prometheus.Gatherer) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.Handler(g))
	serve(lc, log, addr, "metrics", defaultAPILimits.limit(log, mux))
}

// serve runs an HTTP server on a loopback address for the hive's lifetime.
// Its timeouts are for the connection (headers, idle keep-alive); h sets
// each request's own (see apiLimits: no WriteTimeout here, or it would
// cut watches).
func serve(lc cell.Lifecycle, log *slog.Logger, addr, what string, h http.Handler) {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	lc.Append(cell.Hook{
		OnStart: func(cell.HookContext) error {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return fmt.Errorf("address %q: %w", addr, err)
			}
			if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
				return fmt.Errorf("address %q: serve on loopback only", addr)
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			log.Info("Serving", "what", what, "url", "http://"+ln.Addr().String())
			go srv.Serve(ln)
			return nil
		},
		OnStop: func(ctx cell.HookContext) error { return srv.Shutdown(ctx) },
	})
}
