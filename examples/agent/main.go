// Command agent is a complete load-balancing agent built from lbstate's
// cells: a source (a directory of manifests, or a Kubernetes cluster), the
// tables, the reconciler and the maps (kernel maps pinned under
// --lb-pin-dir when it can create them, in-memory otherwise; one log line
// says which). It serves StateDB's HTTP API for lbctl and Prometheus
// metrics on loopback, and stops cleanly on SIGINT or SIGTERM, leaving
// the pinned maps in place.
//
//	go run ./examples/agent --manifests examples/demo --k8s-node-name node-a
//	go run ./examples/agent --kubeconfig ~/.kube/config
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reconciler"
	"github.com/lbstate/lbstate/reflectors/file"
	"github.com/lbstate/lbstate/reflectors/k8s"
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
	manifests, kubeconfig, apiAddr, metricsAddr string
}

func run(args []string) error {
	var af agentFlags
	flags := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	flags.StringVar(&af.manifests, "manifests", "", "Directory of Kubernetes manifests to serve (no cluster needed)")
	flags.StringVar(&af.kubeconfig, "kubeconfig", "", "Kubeconfig of the cluster to serve")
	flags.StringVar(&af.apiAddr, "api-addr", "127.0.0.1:9811", "Loopback address of StateDB's HTTP API (for lbctl), under /statedb")
	flags.StringVar(&af.metricsAddr, "metrics-addr", "127.0.0.1:9812", "Loopback address of the Prometheus metrics, at /metrics")

	h, err := newHive(&af)
	if err != nil {
		return err
	}
	h.RegisterFlags(flags)
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return err
	}
	if (af.manifests == "") == (af.kubeconfig == "") {
		return errors.New("give one of --manifests DIR or --kubeconfig FILE")
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	return h.Run(log)
}

// newHive composes the agent. The source's cell reads af when it is
// built, after the flags are parsed.
func newHive(af *agentFlags) (*hive.Hive, error) {
	return hive.New(
		statedb.Cell,
		job.Cell,
		cell.SimpleHealthCell,
		tables.Cell,
		bpf.Cell,
		reconciler.Cell,
		cell.Config(k8s.DefaultConfig),
		cell.Module("source", "The agent source of services",
			cell.ProvidePrivate(job.Registry.NewGroup),
			cell.Invoke(func(g job.Group, cfg k8s.Config, w *tables.Writer, log *slog.Logger) error {
				return startSource(g, af, cfg, w, log)
			}),
		),
		cell.Invoke(func(lc cell.Lifecycle, db *statedb.DB, m *reconciler.Metrics, maps *bpf.Maps, log *slog.Logger) {
			serve(lc, log, af.apiAddr, "/statedb/", http.StripPrefix("/statedb", db.HTTPHandler()))
			serve(lc, log, af.metricsAddr, "/metrics", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/plain; version=0.0.4")
				m.WritePrometheus(w)
				fmt.Fprintf(w, "# HELP lbstate_source_errors_total Objects skipped as invalid.\n# TYPE lbstate_source_errors_total counter\nlbstate_source_errors_total %d\n", sourceErrors())
			}))
		}),
	), nil
}

var sourceErrors = func() uint64 { return 0 }

// startSource adds the source's job: the manifests directory, or the
// cluster.
func startSource(g job.Group, af *agentFlags, cfg k8s.Config, w *tables.Writer, log *slog.Logger) error {
	if af.manifests != "" {
		if fi, err := os.Stat(af.manifests); err != nil || !fi.IsDir() {
			return fmt.Errorf("--manifests %s: not a directory", af.manifests)
		}
		r, err := k8s.NewFedReflector(cfg, w, lb.SourceFile, log, nil)
		if err != nil {
			return err
		}
		src := file.New(af.manifests, r, log)
		sourceErrors = func() uint64 { return r.Errors() + src.Errors() }
		// A source that fails stops the agent: without it nothing syncs.
		g.Add(job.OneShot("manifests", func(ctx context.Context, _ cell.Health) error { return src.Run(ctx) }, job.WithShutdown()))
		log.Info("Serving a manifests directory", "dir", af.manifests, "node", cfg.K8sNodeName)
		return nil
	}
	rc, err := clientcmd.BuildConfigFromFlags("", af.kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig %s: %w", af.kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	r, err := k8s.NewReflector(cfg, w, client, log)
	if err != nil {
		return err
	}
	sourceErrors = r.Errors
	g.Add(job.OneShot("kubernetes", func(ctx context.Context, _ cell.Health) error { return r.Run(ctx) }, job.WithShutdown()))
	log.Info("Serving a Kubernetes cluster", "server", rc.Host, "node", cfg.K8sNodeName)
	return nil
}

// serve runs an HTTP server on a loopback address for the hive's lifetime.
func serve(lc cell.Lifecycle, log *slog.Logger, addr, pattern string, h http.Handler) {
	mux := http.NewServeMux()
	mux.Handle(pattern, h)
	srv := &http.Server{Handler: mux}
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
			log.Info("Serving", "what", pattern, "addr", ln.Addr().String())
			go srv.Serve(ln)
			return nil
		},
		OnStop: func(ctx cell.HookContext) error { return srv.Shutdown(ctx) },
	})
}
