// Command lbctl looks into lbstate: what the balancer believes and where
// flows go. Subcommands:
//
//	lbctl services|frontends|backends [--api URL] [-o table|json|yaml] [--watch] [--timeout D]
//	lbctl redirects|routes [--api URL] [-o table|json|yaml] [--timeout D]   local redirect policies, traffic splits
//	lbctl maps [--lb-pin-dir DIR | --api URL] [-o table|json|yaml] [--timeout D]
//	lbctl explain FRONTEND [--src ADDR:PORT] [--lb-pin-dir DIR | --api URL | -f DIR]
//	lbctl simulate -f DIR [-o table|json|yaml] [flags]   manifests -> tables -> in-memory maps, offline
//	lbctl top [--lb-pin-dir DIR] [--interval 2s] [-n 10]   the busiest frontends and backends
//	lbctl dump -o FILE [--api URL]   one archive of the agent: tables, maps, flags, metrics, history
//	lbctl history [FRONTEND|SERVICE] [--since D] [--watch] [-o table|json|yaml]   who changed a frontend, when, and what the maps did
//
// Every command that reads an agent (the listings, maps, explain, and
// simulate) reads an archive of lbctl dump instead with --dump FILE,
// offline, and answers as the agent did (dump.go has the layout).
//
// Every command that lists rows takes the same -o: table (the default),
// json or yaml; "text", maps' name for its table before, is accepted as
// table. explain (a walk through the maps) and top (a refreshing screen)
// print for people only.
//
// --api is the agent's HTTP API (http://127.0.0.1:9811 by default): lbctl
// reads its tables under /statedb and its maps' dump at /maps, giving up
// when the agent stays silent for --timeout (10s); it prints rows as they
// arrive, so its memory does not grow with a table. maps and
// explain read pinned maps instead when --lb-pin-dir has them. Flags that
// mirror the agent's have its names. Run "lbctl SUBCOMMAND --help" for a
// subcommand's flags.
package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
)

type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

var commands map[string]command

func init() {
	commands = map[string]command{
		"simulate":  {"Run manifests through tables, reconciler and in-memory maps, and print the result", simulate},
		"services":  {"List a running agent's services", servicesCmd},
		"frontends": {"List a running agent's frontends and their selected backends", frontendsCmd},
		"redirects": {"List a running agent's local redirect policies: what each redirects, to which pods, or why not", redirectsCmd},
		"backends":  {"List a running agent's backends", backendsCmd},
		"routes":    {"List a running agent's traffic splits: parents, shares, what is not applied", routesCmd},
		"maps":      {"Dump an agent's maps, pinned or over its API", mapsCmd},
		"explain":   {"Walk the maps for a flow to a frontend and say which backends it reaches", explain},
		"dump":      {"Write one archive of a running agent's tables, maps, flags and metrics, to read offline with --dump", dumpCmd},
		"history":   {"List a running agent's recent frontend changes: what caused each, what changed, what the maps did", historyCmd},
		"top":       {"Show the busiest frontends and backends from the datapath's counters, refreshing", topCmd},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "lbctl: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	if err := cmd.run(args[1:], stdout, stderr); err != nil {
		if err == errHelp {
			return 0
		}
		fmt.Fprintf(stderr, "lbctl %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: lbctl COMMAND [flags]\n\nCommands:")
	for _, name := range slices.Sorted(maps.Keys(commands)) {
		fmt.Fprintf(w, "  %-10s %s\n", name, commands[name].summary)
	}
}
