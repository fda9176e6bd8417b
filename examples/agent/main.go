// Command agent is a complete load-balancing agent built from lbstate's
// cells: its sources (a directory of manifests, a Kubernetes cluster, or
// both), the tables, the reconciler and the maps (kernel maps pinned under
// --lb-pin-dir when it can create them, in-memory otherwise; one log line
// says which): lbstate.Cell, configured by its flags. It serves lbctl's
// read API (package api: StateDB's HTTP API and the maps' dump) and
// Prometheus metrics on loopback, and stops cleanly on SIGINT or SIGTERM,
// leaving the pinned maps in place.
//
//	go run ./examples/agent --manifests examples/demo --k8s-node-name node-a
//	go run ./examples/agent --kubeconfig ~/.kube/config
//
// With --cluster-name, --cluster-id and --clustermesh-config DIR (and/or
// --clustermesh-export FILE) it joins a clustermesh over etcd; see
// examples/clustermesh.
package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/lbstate/lbstate"
	"github.com/lbstate/lbstate/api"
	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/reflectors/kubeapi"
	"github.com/lbstate/lbstate/tables"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

// agentFlags are the agent's own flags; the cells register theirs.
type agentFlags struct {
	kubeconfig, apiAddr, metricsAddr string
	debug                            bool
	flags                            *pflag.FlagSet // all of them, parsed: served at api.AgentPath
}

func run(args []string) error {
	h, log, err := newAgent(args)
	if err != nil || h == nil {
		return err
	}
	return h.Run(log)
}

// newAgent parses args and returns the agent's hive and logger (a nil
// hive after --help). Tests add cells (extra) to look inside.
func newAgent(args []string, extra ...cell.Cell) (*hive.Hive, *slog.Logger, error) {
	var af agentFlags
	flags := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	af.flags = flags
	flags.StringVar(&af.kubeconfig, "kubeconfig", "", "Kubeconfig of the cluster to serve")
	flags.StringVar(&af.apiAddr, "api-addr", "127.0.0.1:9811", "Loopback address of the HTTP API for lbctl: StateDB under "+api.StateDBPath+", the maps' dump at "+api.MapsPath+", the agent's version and flags at "+api.AgentPath+", its metrics at "+api.MetricsPath)
	flags.StringVar(&af.metricsAddr, "metrics-addr", "127.0.0.1:9812", "Loopback address of the Prometheus metrics, at /metrics")
	flags.BoolVar(&af.debug, "debug", false, "Log at DEBUG, including hive's lines for every start and stop hook")

	h := newHive(&af, extra...)
	h.RegisterFlags(flags)
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, nil, nil
		}
		return nil, nil, err
	}
	if flags.NArg() > 0 {
		return nil, nil, fmt.Errorf("unexpected argument %q (flags start with --; see --help)", flags.Arg(0))
	}
	manifests, _ := flags.GetString("manifests")
	mesh, _ := flags.GetString("clustermesh-config")
	if manifests == "" && af.kubeconfig == "" && mesh == "" {
		return nil, nil, errors.New("no source: give --manifests DIR (e.g. --manifests examples/demo), --kubeconfig FILE, --clustermesh-config DIR, or several")
	}
	log := newLogger(os.Stderr, af.debug)
	// client-go's lines (reflector warnings, leader election) in the
	// agent's log, in its format, instead of klog's own on stderr.
	klog.SetSlogLogger(log.With("component", "client-go"))
	return h, log, nil
}

// newHive composes the agent: lbstate.Cell (every source, configured by
// its flags), the cluster's clients and the servers. Cells read af when
// they are built, after the flags are parsed.
func newHive(af *agentFlags, extra ...cell.Cell) *hive.Hive {
	return hive.New(append([]cell.Cell{
		lbstate.Cell,
		cell.Provide(func() (kubeapi.Clients, error) { return newKubeClients(af.kubeconfig) }),
		cell.Invoke(func(lc cell.Lifecycle, log *slog.Logger, db *statedb.DB, maps *bpf.Maps, gatherer prometheus.Gatherer, w *tables.Writer) {
			serveAPI(lc, log, af.apiAddr, db, maps, api.Agent{Flags: af.flags, Gatherer: gatherer, History: w.History()})
			serveMetrics(lc, log, af.metricsAddr, gatherer)
		}),
	}, extra...)...)
}

// newKubeClients returns the clients of the cluster in the kubeconfig
// (kubeapi.Clients: a clientset, a metadata client for every Node's
// labels, a dynamic client for the CRD-backed kinds), all nil when there
// is no cluster.
func newKubeClients(kubeconfig string) (kubeapi.Clients, error) {
	if kubeconfig == "" {
		return kubeapi.Clients{}, nil
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return kubeapi.Clients{}, fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
	}
	return kubeapi.NewClients(rc)
}
