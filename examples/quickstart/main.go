// Command quickstart embeds lbstate the way an agent does: it composes the
// StateDB and lbstate cells with hive, declares a few services and their
// backends through the Writer, and prints the tables, showing which
// backends each frontend selected on this node.
//
//	go run ./examples/quickstart [--node-name N] [--zone Z]
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

func main() {
	node := flag.String("node-name", "node-a", "The local node's name (traffic policy Local)")
	zone := flag.String("zone", "zone-a", "The local node's zone (topology-aware routing)")
	flag.Parse()

	var w *tables.Writer
	h := hive.New(
		statedb.Cell,
		tables.Cell,
		cell.Invoke(func(wr *tables.Writer) { w = wr }),
	)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := h.Start(log, context.Background()); err != nil {
		fail(err)
	}
	defer h.Stop(log, context.Background())

	txn := w.WriteTxn()
	if err := declare(w, txn, lb.Node{Name: *node, Zone: *zone}); err != nil {
		txn.Abort()
		fail(err)
	}
	rtxn := txn.Commit()

	fmt.Printf("Node %s in zone %s. No BPF maps yet: this shows the tables the\nreconciler will write into them.\n\n", *node, *zone)
	printTable(w.Services().All(rtxn))
	fmt.Println()
	printTable(w.Frontends().All(rtxn))
}

// declare writes what a Kubernetes source would for three services: a web
// service with a canary at 10% and a terminating pod, a NodePort with
// externalTrafficPolicy Local, and a DNS service with zone hints.
func declare(w *tables.Writer, txn statedb.WriteTxn, node lb.Node) error {
	addr := lb.MustParseL3n4Addr
	web, ingress, dns := lb.NewServiceName("shop", "web"), lb.NewServiceName("shop", "ingress"), lb.NewServiceName("kube-system", "dns")
	steps := []func() error{
		func() error { return w.SetLocalNode(txn, node) },
		func() error {
			return w.UpsertService(txn, lb.ServiceParams{Name: web, Source: lb.SourceK8s, Algorithm: lb.AlgorithmMaglev,
				Frontends: []lb.FrontendParams{
					{Address: addr("10.96.0.10:80/TCP"), Type: lb.SVCTypeClusterIP, PortName: "http"},
					{Address: addr("[fd00:96::10]:80/TCP"), Type: lb.SVCTypeClusterIP, PortName: "http"},
				}})
		},
		func() error {
			return w.UpsertBackends(txn, web, lb.SourceK8s,
				lb.BackendParams{Address: addr("10.0.1.1:8080/TCP"), PortNames: []string{"http"}, Weight: 90},
				lb.BackendParams{Address: addr("10.0.1.2:8080/TCP"), PortNames: []string{"http"}, Weight: 90, State: lb.BackendTerminating},
				lb.BackendParams{Address: addr("10.0.2.1:8080/TCP"), PortNames: []string{"http"}, Weight: 10},
				lb.BackendParams{Address: addr("[fd00:1::1]:8080/TCP"), PortNames: []string{"http"}, Weight: 100})
		},
		func() error {
			return w.UpsertService(txn, lb.ServiceParams{Name: ingress, Source: lb.SourceK8s,
				ExtTrafficPolicy: lb.TrafficPolicyLocal, HealthCheckNodePort: 32000,
				Frontends: []lb.FrontendParams{
					{Address: addr("0.0.0.0:30443/TCP"), Type: lb.SVCTypeNodePort},
					{Address: addr("0.0.0.0:30443/TCP/i"), Type: lb.SVCTypeNodePort},
					{Address: addr("10.96.0.20:443/TCP"), Type: lb.SVCTypeClusterIP},
				}})
		},
		func() error {
			return w.UpsertBackends(txn, ingress, lb.SourceK8s,
				lb.BackendParams{Address: addr("10.0.1.5:8443/TCP"), NodeName: "node-a", Weight: lb.DefaultBackendWeight},
				lb.BackendParams{Address: addr("10.0.2.5:8443/TCP"), NodeName: "node-b", Weight: lb.DefaultBackendWeight})
		},
		func() error {
			return w.UpsertService(txn, lb.ServiceParams{Name: dns, Source: lb.SourceK8s,
				TrafficDistribution: lb.TrafficDistributionPreferSameZone,
				Frontends: []lb.FrontendParams{
					{Address: addr("10.96.0.53:53/UDP"), Type: lb.SVCTypeClusterIP, PortName: "dns"},
				}})
		},
		func() error {
			return w.UpsertBackends(txn, dns, lb.SourceK8s,
				lb.BackendParams{Address: addr("10.0.1.53:53/UDP"), PortNames: []string{"dns"}, Zone: "zone-a", ForZones: []string{"zone-a"}, Weight: lb.DefaultBackendWeight},
				lb.BackendParams{Address: addr("10.0.2.53:53/UDP"), PortNames: []string{"dns"}, Zone: "zone-b", ForZones: []string{"zone-b"}, Weight: lb.DefaultBackendWeight})
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

type row interface {
	TableHeader() []string
	TableRow() []string
}

func printTable[T row](objs func(func(T, statedb.Revision) bool)) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 8, 3, ' ', 0)
	first := true
	for obj := range objs {
		if first {
			fmt.Fprintln(tw, strings.Join(obj.TableHeader(), "\t"))
			first = false
		}
		fmt.Fprintln(tw, strings.Join(obj.TableRow(), "\t"))
	}
	tw.Flush()
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "quickstart:", err)
	os.Exit(1)
}
