package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/lbstate/lbstate/tables"
)

// parseOptions reads lbbench's command line with pflag, as lbctl and the
// agent read theirs. args without the program name; usage and errors go
// to stderr; pflag.ErrHelp after --help.
func parseOptions(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := pflag.NewFlagSet("lbbench", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false // in the order registered: the sizes first, then the modes
	fs.IntVar(&o.services, "services", 50000, "Services, each one ClusterIP port and one EndpointSlice")
	fs.IntVar(&o.backends, "backends", 1, "Endpoints per EndpointSlice")
	fs.IntVar(&o.iterations, "iterations", 5, "Insert/delete rounds")
	fs.StringVar(&o.maps, "maps", defaultMaps(), "kernel or memory")
	fs.BoolVar(&o.defaultMapSizes, "default-map-sizes", false, "Size the maps as an agent given no flag does, not to the run (which fails if it does not fit)")
	fs.BoolVar(&o.json, "json", false, "Print a JSON summary as the last line")
	fs.IntVar(&o.historyMaxBytes, "history-max-bytes", tables.DefaultHistoryMaxBytes, "The journal of frontend changes' memory cap, as the agent's flag; 0 turns it off (to measure what it costs)")
	fs.BoolVar(&o.latency, "latency", false, "With the services loaded, update one EndpointSlice at a time and report latencies")
	fs.IntVar(&o.updates, "updates", 1000, "Updates in --latency mode")
	fs.BoolVar(&o.topology, "topology", false, "Services with topology keys over 1,000 nodes (default 10,000 x 10): time node relabels (--updates of them)")
	fs.IntVar(&o.clusters, "clusters", 0, "Clustermesh: this many remote clusters share --services global services (default 10,000 x 10) in one etcd; time the import, its heap and watch events, and single changes (--updates of them)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "Write a CPU profile of the rounds (-clusters: of the convergence, and of the rest in PATH.watch; -restart: of the restarted pipeline until synced and pruned)")
	fs.StringVar(&o.profilePhase, "profile-phase", "", "insert or delete: --cpuprofile profiles that phase alone, of each round after the first, into PATH.2, PATH.3, ... (merge them: go tool pprof PATH.*)")
	fs.StringVar(&o.trace, "trace", "", "Write an execution trace of the rounds (go tool trace; -restart: of the restarted pipeline until synced and pruned), and mutex and block profiles beside it (FILE.mutex, FILE.block)")
	fs.StringVar(&o.memProfile, "memprofile", "", "Write a heap profile taken with the services loaded (sampled every 4 KiB allocated); with --memory-after-delete, of what is left, and FILE.fresh of the fresh pipeline (for pprof -base)")
	fs.IntVar(&o.redirects, "redirects", 0, "Measure local redirect policies instead: this many, over 10,000 services by default (--services), applied and removed, and --updates pod changes")
	fs.StringVar(&o.compare, "compare", "", "A saved run of Cilium's benchmark (or an lbbench --json line) to print our ratios against")
	fs.IntVar(&o.routes, "routes", 0, "Measure N TrafficSplits instead (default 10,000 services x 10): apply all, shift all, and --updates single shifts")
	fs.BoolVar(&o.retainedMode, "memory-after-delete", false, "Measure the live heap of a fresh pipeline, and after --services x --backends came and went")
	fs.BoolVar(&o.restart, "restart", false, "Measure a restart instead: load --services x --backends (default 100,000 x 10) into pinned kernel maps, stop, and time a fresh pipeline over the same pins and declarations to synced and pruned, with its writes per map and peak RSS")
	fs.BoolVar(&o.healthMode, "health", false, "Measure health checking instead: probes of loopback backends, their CPU, and stopped backends' trips into the maps")
	fs.IntVar(&o.health.backends, "health-backends", 10000, "Backends in --health mode, 10 per service")
	fs.DurationVar(&o.health.interval, "health-interval", time.Second, "Probe interval in --health mode")
	fs.DurationVar(&o.health.window, "health-window", 10*time.Second, "Measured time in --health mode, after two intervals of warm-up")
	fs.IntVar(&o.health.fail, "health-fail", 100, "Backends stopped in --health mode to time their trips (one per service)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: lbbench [flags]\n\nMeasures the pipeline, Kubernetes objects to BPF maps.\n\nFlags:\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(twoDashes(fs, args)); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q (lbbench takes flags only; see --help)", fs.Arg(0))
	}
	o.given = map[string]bool{}
	fs.Visit(func(f *pflag.Flag) { o.given[f.Name] = true })
	return o, nil
}

// twoDashes spells a long flag given with one dash (-services 1000, as Go's
// flag package took it) with two, as pflag wants: pflag would read it as
// the shorthands -s -e -r... lbbench has no shorthands, so nothing else can
// be meant.
func twoDashes(fs *pflag.FlagSet, args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if a == "--" {
			copy(out[i:], args[i:])
			break
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && fs.Lookup(name) != nil {
			out[i] = "-" + a
		}
	}
	return out
}
