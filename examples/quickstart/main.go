// Command quickstart embeds lbstate the way an agent does: it composes
// lbstate.Core (StateDB, the tables, the maps and the reconciler) with
// hive, declares a few services and their backends through the Writer,
// waits until the reconciler has written them into the maps, and prints
// the tables and the maps. It uses real BPF maps, pinned in --pin-dir, when it can create
// them (as root), and in-memory maps otherwise, and says which.
//
//	go run ./examples/quickstart [--node-name N] [--zone Z] [--keep-maps]
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/lbstate/lbstate"
	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
	lbreconciler "github.com/lbstate/lbstate/reconciler"
	"github.com/lbstate/lbstate/tables"
)

func main() {
	node := flag.String("node-name", "node-a", "The local node's name (traffic policy Local)")
	zone := flag.String("zone", "zone-a", "The local node's zone (topology-aware routing)")
	pinDir := flag.String("pin-dir", "/sys/fs/bpf/lbstate-quickstart", "Where kernel maps are pinned")
	keep := flag.Bool("keep-maps", false, "Leave the pinned maps in place at exit, as an agent does")
	flag.Parse()

	var (
		db        *statedb.DB
		w         *tables.Writer
		maps      *bpf.Maps
		frontends statedb.Table[*lb.Frontend]
		rec       reconciler.Reconciler[*lb.Frontend]
	)
	h := hive.New(
		lbstate.Core,
		cell.Invoke(func(d *statedb.DB, wr *tables.Writer, m *bpf.Maps, fes statedb.Table[*lb.Frontend], r reconciler.Reconciler[*lb.Frontend]) {
			db, w, maps, frontends, rec = d, wr, m, fes, r
		}),
	)
	hive.AddConfigOverride(h, func(c *bpf.Config) { c.LBPinDir = *pinDir })
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := h.Start(log, context.Background()); err != nil {
		fail(err)
	}

	txn := w.WriteTxn()
	if err := declare(w, txn, lb.Node{Name: *node, Zone: *zone}); err != nil {
		txn.Abort()
		fail(err)
	}
	rtxn := txn.Commit()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := lbreconciler.WaitReconciled(ctx, rec, frontends.Revision(rtxn)); err != nil {
		fail(err)
	}

	if maps.Kind == "kernel" {
		fmt.Printf("Maps: kernel BPF maps, pinned in %s\n", *pinDir)
	} else {
		fmt.Println("Maps: in memory (this process cannot create BPF maps; run as root for kernel maps)")
	}
	fmt.Printf("Node %s in zone %s.\n\n", *node, *zone)
	rtxn = db.ReadTxn()
	printTable(w.Services().All(rtxn))
	fmt.Println()
	printTable(w.Frontends().All(rtxn))
	fmt.Println()
	d, err := bpf.TakeDump(maps)
	if err != nil {
		fail(err)
	}
	d.WriteText(os.Stdout)

	if err := h.Stop(log, context.Background()); err != nil {
		fail(err)
	}
	if maps.Kind == "kernel" && !*keep {
		os.RemoveAll(*pinDir)
	}
}

// declare writes what a Kubernetes source would for three services: a web
// service with a canary at 10% and a terminating pod, a NodePort with
// externalTrafficPolicy Local, and a DNS service with zone hints.
func declare(w *tables.Writer, txn statedb.WriteTxn, node lb.Node) error {
	addr := lb.MustParseL3n4Addr
	web, ingress, dns := lb.NewServiceName("shop", "web"), lb.NewServiceName("shop", "ingress"), lb.NewServiceName("kube-system", "dns")
	steps := []func() error{
		func() error { return w.SetLocalNode(txn, lb.SourceAPI, node) },
		func() error {
			return w.UpsertService(txn, lb.ServiceParams{Name: web, Source: lb.SourceK8s, Algorithm: lb.AlgorithmMaglev,
				Frontends: []lb.FrontendParams{
					{Address: addr("10.96.0.10:80/TCP"), Type: lb.SVCTypeClusterIP, PortName: "http"},
					{Address: addr("[fd00:96::10]:80/TCP"), Type: lb.SVCTypeClusterIP, PortName: "http"},
				}})
		},
		func() error {
			return w.UpsertBackends(txn, web, lb.SourceK8s,
				lb.BackendParams{Address: addr("10.0.1.1:8080/TCP"), Weight: 90}.WithPortNames("http"),
				lb.BackendParams{Address: addr("10.0.1.2:8080/TCP"), Weight: 90, State: lb.BackendTerminating}.WithPortNames("http"),
				lb.BackendParams{Address: addr("10.0.2.1:8080/TCP"), Weight: 10}.WithPortNames("http"),
				lb.BackendParams{Address: addr("[fd00:1::1]:8080/TCP"), Weight: 100}.WithPortNames("http"))
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
				lb.BackendParams{Address: addr("10.0.1.53:53/UDP"), Zone: "zone-a", Weight: lb.DefaultBackendWeight}.WithPortNames("dns").WithTopologyHints([]string{"zone-a"}, nil),
				lb.BackendParams{Address: addr("10.0.2.53:53/UDP"), Zone: "zone-b", Weight: lb.DefaultBackendWeight}.WithPortNames("dns").WithTopologyHints([]string{"zone-b"}, nil))
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
