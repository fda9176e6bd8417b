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

	"github.com/lbstate/lbstate/api"
	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/metrics"
)

// serveAPI serves lbctl's read API (package api: the tables under
// /statedb/, the maps' dump at /maps, and what agent says of itself at
// /agent and /metrics: all lbctl dump reads).
func serveAPI(lc cell.Lifecycle, log *slog.Logger, addr string, db *statedb.DB, maps *bpf.Maps, agent api.Agent) {
	mux := http.NewServeMux()
	api.Register(mux, log, db, maps)
	api.RegisterAgent(mux, log, agent)
	serve(lc, log, addr, "API", mux)
}

// serveMetrics serves what g gathers at /metrics, within the API's limits.
func serveMetrics(lc cell.Lifecycle, log *slog.Logger, addr string, g prometheus.Gatherer) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.Handler(g))
	serve(lc, log, addr, "metrics", api.DefaultLimits.Wrap(log, mux))
}

// serve runs an HTTP server on a loopback address for the hive's lifetime.
// Its timeouts are for the connection (headers, idle keep-alive); h sets
// each request's own (see api.Limits: no WriteTimeout here, or it would
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
