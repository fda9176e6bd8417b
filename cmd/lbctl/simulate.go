package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"
	"github.com/spf13/pflag"

	"github.com/lbstate/lbstate"
	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
	lbreconciler "github.com/lbstate/lbstate/reconciler"
	"github.com/lbstate/lbstate/reflectors/file"
	"github.com/lbstate/lbstate/reflectors/k8s"
	"github.com/lbstate/lbstate/reflectors/kubeapi"
	"github.com/lbstate/lbstate/tables"
)

// frontendView is one frontend as simulate prints it.
type frontendView struct {
	Frontend  string `json:"frontend"`
	Type      string `json:"type"`
	Service   string `json:"service"`
	PortName  string `json:"portName"`
	Algorithm string `json:"algorithm"`
	// Topology is the level the service's topology keys chose on the
	// simulated node (lb.Frontend.TopologyLevel).
	Topology string `json:"topology,omitempty"`
	// RedirectedTo is the service whose backends replace the frontend's
	// own (a local redirect policy's namespace/name:lrp).
	RedirectedTo string `json:"redirectedTo,omitempty"`
	// ProxyPort is the port of the L7 proxy on this node that takes the
	// frontend's new flows (lbstate.io/proxy-port); the backends stay
	// listed, for the proxy.
	ProxyPort uint16 `json:"proxyPort,omitempty"`
	// Route names the traffic split that chose the backends.
	Route    string        `json:"route,omitempty"`
	Backends []backendView `json:"backends"`
}

// rejectAddress stands, in a frontend's backends, for the share of its
// new flows that the datapath rejects (lb.Frontend.Rejected): the slots
// and Maglev elements of bpf.BackendReject.
const rejectAddress = "reject"

type backendView struct {
	Address string `json:"address"`
	State   string `json:"state"`
	Weight  uint16 `json:"weight"`
	// Cluster is the ID of the remote cluster that offers the backend;
	// 0 (left out) for this cluster's own.
	Cluster uint32 `json:"cluster,omitempty"`
	// Slots is how many Maglev table slots (or random-algorithm service
	// slots) take the backend.
	Slots int `json:"slots"`
	// Share is the backend's share of new flows in percent: its slots
	// over the frontend's.
	Share float64 `json:"share"`
}

func simulate(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("simulate", "Usage: lbctl simulate -f DIR [flags]\n\nRuns the manifests in DIR through lbstate's tables, reconciler and\nin-memory maps, offline, and prints each frontend with its backends.", stderr)
	offline := addPipelineFlags(fs, "Directory of Kubernetes manifests (required)", "")
	showMaps := fs.Bool("maps", false, "Also print the maps' dump (with -o json or yaml: {frontends, maps})")
	output := addOutputFlag(fs, "aligned columns; with --maps, then the dump")
	dump := addDumpFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dump != "" {
		return simulateDump(fs, offline, *dump, *showMaps, output.format, stdout)
	}
	if !offline.given() {
		fs.Usage()
		return errors.New("-f DIR is required: a directory of Kubernetes manifests, such as examples/demo")
	}

	p, err := offline.start(stderr)
	if err != nil {
		return err
	}
	defer p.stop()
	d, err := bpf.TakeDump(p.maps)
	if err != nil {
		return err
	}
	fes := statedb.ToSeq(p.frontends.All(p.db.ReadTxn()))
	return printSimulation(stdout, buildViews(fes, d), d, *showMaps, output.format)
}

// printSimulation prints views, and with showMaps the dump d, in format.
func printSimulation(stdout io.Writer, views []frontendView, d *bpf.Dump, showMaps bool, format string) error {
	if format != formatTable {
		var doc any = views
		if showMaps {
			doc = struct {
				Frontends []frontendView `json:"frontends"`
				Maps      *bpf.Dump      `json:"maps"`
			}{views, d}
		}
		if format == formatYAML {
			return writeYAML(stdout, doc)
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(doc)
	}
	printViews(stdout, views)
	if showMaps {
		fmt.Fprintln(stdout)
		return d.WriteText(stdout)
	}
	return nil
}

// pipeline is lbstate running in this process over in-memory maps, fed by
// a manifests directory.
type pipeline struct {
	db        *statedb.DB
	w         *tables.Writer
	frontends statedb.Table[*lb.Frontend]
	maps      *bpf.Maps
	stop      func()
}

// pipelineFlags configure the offline pipeline (simulate, explain -f).
// They have the agent's names and defaults, so that the same manifests
// give the agent's maps.
type pipelineFlags struct {
	fs        *pflag.FlagSet
	dir       string
	nodeName  string
	zone      string
	algorithm string
	tableSize uint32
}

// addPipelineFlags registers the flags; suffix ends the usage of those
// that only matter with -f.
func addPipelineFlags(fs *pflag.FlagSet, dirUsage, suffix string) *pipelineFlags {
	p := &pipelineFlags{fs: fs}
	fs.StringVarP(&p.dir, "manifests", "f", "", dirUsage)
	fs.StringVar(&p.nodeName, "k8s-node-name", "node-a", "The local node (its Node manifest, if any, gives zone and addresses)"+suffix)
	fs.StringVar(&p.zone, "zone", "", "The local node's zone, overriding its manifest's"+suffix)
	fs.StringVar(&p.algorithm, "lb-algorithm", lbreconciler.DefaultConfig.LBAlgorithm, "Algorithm for services that do not choose one: random or maglev"+suffix)
	fs.Uint32Var(&p.tableSize, "lb-maglev-table-size", bpf.DefaultConfig.LBMaglevTableSize, "Maglev table size, a prime"+suffix)
	return p
}

func (p *pipelineFlags) given() bool { return p.dir != "" }

// unused fails when flags that only matter with -f are given without it.
func (p *pipelineFlags) unused() error {
	for _, name := range []string{"k8s-node-name", "zone", "lb-algorithm", "lb-maglev-table-size"} {
		if p.fs.Changed(name) {
			return fmt.Errorf("--%s needs -f DIR: an agent's maps already follow its own settings", name)
		}
	}
	return nil
}

// start checks the flags, then runs the manifests through the pipeline.
func (p *pipelineFlags) start(logTo io.Writer) (*pipeline, error) {
	if fi, err := os.Stat(p.dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("-f %s: not a directory (give a directory of Kubernetes manifests, such as examples/demo)", p.dir)
	}
	// Checked here, as the agent would: the hive would report the same
	// errors wrapped in its own.
	cfg := bpf.DefaultConfig
	cfg.LBMaglevTableSize = p.tableSize
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var alg lb.Algorithm
	if err := alg.UnmarshalText([]byte(p.algorithm)); err != nil || alg == lb.AlgorithmDefault {
		return nil, fmt.Errorf("--lb-algorithm %q: want random or maglev", p.algorithm)
	}
	return startPipeline(p.dir, p.nodeName, p.zone, p.algorithm, p.tableSize, logTo)
}

// startPipeline serves dir through the whole pipeline (the agent's
// lbstate.Cell: the manifests source, tables, reconciler, here with
// in-memory maps) and returns once the reconciler has written everything. A zone overrides the local node's,
// as the agent's --k8s-node-zone does.
func startPipeline(dir, nodeName, zone, algorithm string, tableSize uint32, logTo io.Writer) (*pipeline, error) {
	var (
		db        *statedb.DB
		w         *tables.Writer
		maps      *bpf.Maps
		frontends statedb.Table[*lb.Frontend]
		rec       reconciler.Reconciler[*lb.Frontend]
	)
	h := hive.New(
		lbstate.Cell, // every source idle but the manifests directory, set below
		cell.Invoke(func(d *statedb.DB, wr *tables.Writer, m *bpf.Maps, fes statedb.Table[*lb.Frontend], r reconciler.Reconciler[*lb.Frontend]) {
			db, w, maps, frontends, rec = d, wr, m, fes, r
		}),
	)
	hive.AddConfigOverride(h, func(c *file.Config) { c.Manifests = dir })
	hive.AddConfigOverride(h, func(c *kubeapi.NodeConfig) { c.K8sNodeName = nodeName })
	hive.AddConfigOverride(h, func(c *k8s.Flags) { c.K8sNodeZone = zone })
	hive.AddConfigOverride(h, func(c *bpf.ModeConfig) { c.LBMaps = "memory" })
	hive.AddConfigOverride(h, func(c *bpf.Config) { c.LBMaglevTableSize = tableSize })
	hive.AddConfigOverride(h, func(c *lbreconciler.Config) { c.LBAlgorithm = algorithm })
	log := slog.New(slog.NewTextHandler(logTo, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := h.Start(log, context.Background()); err != nil {
		return nil, err
	}
	stop := func() { h.Stop(log, context.Background()) }
	if err := waitSettled(db, w, frontends, rec); err != nil {
		stop()
		return nil, err
	}
	return &pipeline{db: db, w: w, frontends: frontends, maps: maps, stop: stop}, nil
}

// waitSettled waits until the file source's objects are in the tables and
// the reconciler has written every frontend.
func waitSettled(db *statedb.DB, w *tables.Writer, frontends statedb.Table[*lb.Frontend], rec reconciler.Reconciler[*lb.Frontend]) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, initialized := w.Frontends().Initialized(db.ReadTxn())
	select {
	case <-initialized:
	case <-ctx.Done():
		return errors.New("the manifests were not applied in 30s")
	}
	return lbreconciler.WaitReconciled(ctx, rec, frontends.Revision(db.ReadTxn()))
}

// buildViews joins each frontend with its slots in the maps' dump d.
func buildViews(frontends iter.Seq[*lb.Frontend], d *bpf.Dump) []frontendView {
	addrOf := map[uint32]string{bpf.BackendReject: rejectAddress}
	for _, b := range d.Backends {
		addrOf[b.ID] = b.L3n4Addr().String()
	}
	maglevSlots := map[uint32]map[string]int{} // by frontend ID
	for _, m := range d.Maglev {
		counts := map[string]int{}
		for id, n := range m.Slots {
			counts[addrOf[id]] = n
		}
		maglevSlots[m.RevNatID] = counts
	}
	serviceSlots := map[string]map[string]int{} // by frontend address
	masters := map[string]bpf.ServiceEntry{}
	for _, s := range d.Services {
		if s.Slot == 0 {
			masters[s.Frontend.String()] = s
		}
	}
	for _, s := range d.Services {
		fa := s.Frontend.String()
		if s.Slot == 0 || int(s.Slot) > int(masters[fa].Count) {
			continue // masters and standby slots take no new flows
		}
		if serviceSlots[fa] == nil {
			serviceSlots[fa] = map[string]int{}
		}
		serviceSlots[fa][addrOf[s.BackendID]]++
	}

	var views []frontendView
	for fe := range frontends {
		fa := fe.Address.String()
		v := frontendView{Frontend: fa, Type: fe.Type.String(), Service: fe.Service.String(), PortName: fe.PortName, Topology: fe.TopologyLevel()}
		if m, ok := masters[fa]; ok {
			v.Algorithm = m.AlgorithmName()
		}
		if !fe.RedirectedTo().IsZero() {
			v.RedirectedTo = fe.RedirectedTo().String()
		}
		v.ProxyPort = fe.ProxyPort()
		v.Route = fe.RoutedBy()
		slots := serviceSlots[fa]
		if v.Algorithm == "maglev" {
			slots = maglevSlots[fe.ID]
		}
		total := 0
		for _, n := range slots {
			total += n
		}
		for _, b := range fe.Backends {
			bv := backendView{Address: b.Address.String(), State: b.State.String(), Weight: b.Weight, Cluster: b.ClusterID, Slots: slots[b.Address.String()]}
			if total > 0 {
				bv.Share = 100 * float64(bv.Slots) / float64(total)
			}
			v.Backends = append(v.Backends, bv)
		}
		if fe.Rejected() > 0 {
			bv := backendView{Address: rejectAddress, State: "rejected", Weight: fe.Rejected(), Slots: slots[rejectAddress]}
			if total > 0 {
				bv.Share = 100 * float64(bv.Slots) / float64(total)
			}
			v.Backends = append(v.Backends, bv)
		}
		views = append(views, v)
	}
	return views
}

func printViews(w io.Writer, views []frontendView) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	// TOPOLOGY only when some service has topology keys.
	topology := slices.ContainsFunc(views, func(v frontendView) bool { return v.Topology != "" })
	// REDIRECTED-TO only when a frontend is redirected.
	redirects := slices.ContainsFunc(views, func(v frontendView) bool { return v.RedirectedTo != "" })
	// CLUSTER only when a backend is another cluster's (empty for ours).
	clusters := slices.ContainsFunc(views, func(v frontendView) bool {
		return slices.ContainsFunc(v.Backends, func(b backendView) bool { return b.Cluster != 0 })
	})
	// PROXY only when a frontend's new flows go to an L7 proxy.
	proxies := slices.ContainsFunc(views, func(v frontendView) bool { return v.ProxyPort != 0 })
	// ROUTE and SHARE only when a frontend is routed.
	routed := slices.ContainsFunc(views, func(v frontendView) bool { return v.Route != "" })
	header := []string{"FRONTEND", "TYPE", "SERVICE", "PORTNAME"}
	if proxies {
		header = append(header, "PROXY")
	}
	if redirects {
		header = append(header, "REDIRECTED-TO")
	}
	if routed {
		header = append(header, "ROUTE")
	}
	header = append(header, "ALGORITHM")
	if topology {
		header = append(header, "TOPOLOGY")
	}
	header = append(header, "BACKEND")
	if clusters {
		header = append(header, "CLUSTER")
	}
	header = append(header, "STATE", "WEIGHT", "SLOTS")
	if routed {
		header = append(header, "SHARE")
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, v := range views {
		first := []string{v.Frontend, v.Type, v.Service, v.PortName}
		if proxies {
			proxy := ""
			if v.ProxyPort != 0 {
				proxy = strconv.Itoa(int(v.ProxyPort))
			}
			first = append(first, proxy)
		}
		if redirects {
			first = append(first, v.RedirectedTo)
		}
		if routed {
			first = append(first, v.Route)
		}
		first = append(first, v.Algorithm)
		if topology {
			first = append(first, v.Topology)
		}
		if len(v.Backends) == 0 {
			fmt.Fprintf(tw, "%s\t(none)\t\t\t\n", strings.Join(first, "\t"))
			continue
		}
		for i, b := range v.Backends {
			lead := first
			if i > 0 {
				lead = make([]string, len(first))
			}
			backend := b.Address
			if clusters {
				backend += "\t" + clusterColumn(b.Cluster)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d", strings.Join(lead, "\t"), backend, b.State, b.Weight, b.Slots)
			if routed {
				fmt.Fprintf(tw, "\t%.1f%%", b.Share)
			}
			fmt.Fprintln(tw)
		}
	}
	tw.Flush()
}

// clusterColumn prints a backend's cluster: its ID, empty for ours.
func clusterColumn(id uint32) string {
	if id == 0 {
		return ""
	}
	return strconv.FormatUint(uint64(id), 10)
}
