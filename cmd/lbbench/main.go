// Command lbbench measures the whole pipeline: Kubernetes Services and
// EndpointSlices handed to the Kubernetes reflector as its informers would
// hand them (no API server), through the Writer and the reconciler into
// BPF maps (kernel maps when it can create them, in-memory otherwise).
//
//	go run ./cmd/lbbench [--services 50000] [--backends 1] [--iterations 5] [--maps kernel|memory] [--json]
//	go run ./cmd/lbbench --latency      # update one slice at a time, 1000 times
//	go run ./cmd/lbbench --compare FILE # ratios against a saved run of Cilium's benchmark
//	go run ./cmd/lbbench --health       # health checking: 10,000 loopback backends probed every second
//	go run ./cmd/lbbench --topology     # relabel one node at a time, with topology keys
//	go run ./cmd/lbbench --clusters 10  # clustermesh: 10 remote clusters x 10,000 services x 10 backends over etcd
//	go run ./cmd/lbbench --redirects 1000   # apply and remove local redirect policies; one pod change
//	go run ./cmd/lbbench --routes 1000  # traffic splits: apply, shift all, one shift's latency
//	go run ./cmd/lbbench --memory-after-delete --services 100000 --backends 10  # live heap after a delete-all
//	go run ./cmd/lbbench --restart      # 100,000 x 10 in pinned maps: a fresh pipeline's time to synced and pruned, its writes
//
// Flags are pflag's, as lbctl's and the agent's: long names take two
// dashes. The one-dash spelling of lbbench's Go-flag days (-services
// 1000) still works, so that saved command lines keep running.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbstate/lbstate"
	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
	lbreconciler "github.com/lbstate/lbstate/reconciler"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/reflectors/k8s"
	"github.com/lbstate/lbstate/reflectors/redirectpolicy"
	"github.com/lbstate/lbstate/reflectors/routes"
	"github.com/lbstate/lbstate/tables"
)

type options struct {
	services, backends, iterations, updates int
	redirects                               int
	maps                                    string
	// pinDir is where kernel maps are pinned, removed at the end; "" is
	// a directory of the run's own under /sys/fs/bpf. Tests give one on
	// a bpffs of their own (bpftest.PinDir), so that nothing is mounted
	// on the host's /sys/fs/bpf.
	pinDir                        string
	json, latency, topology       bool
	clusters                      int
	cpuProfile, memProfile, trace string
	profilePhase                  string // --profile-phase: "", "insert" or "delete"
	compare                       string // a saved anchor run
	healthMode                    bool
	retainedMode                  bool // --memory-after-delete
	historyMaxBytes               int  // --history-max-bytes: the journal's cap (0: off)
	routes                        int
	health                        healthOptions
	// given names the flags set on the command line: a mode's defaults
	// yield to them.
	given map[string]bool
	// defaultMapSizes keeps bpf.DefaultConfig's map sizes, as an agent
	// given no flag has them, rather than sizing the maps to the run.
	defaultMapSizes bool
	// cells and configure add to newBench's hive (-health's checker).
	cells     []cell.Cell
	configure func(*hive.Hive)
	// -restart: keepPins leaves the pinned maps for the next pipeline,
	// and initial pushes the objects the reflector lists before it marks
	// itself synced (nothing is pruned before).
	restart  bool
	keepPins bool
	initial  func(*k8s.Reflector)
}

// result is the JSON summary, printed as the last line with -json.
type result struct {
	Maps                   string  `json:"maps"`
	Services               int     `json:"services"`
	BackendsPerService     int     `json:"backends_per_service"`
	InsertServicesPerSec   stats   `json:"insert_services_per_sec"`
	DeleteServicesPerSec   stats   `json:"delete_services_per_sec"`
	InsertServicesPerSecAv float64 `json:"insert_services_per_sec_avg"`
	DeleteServicesPerSecAv float64 `json:"delete_services_per_sec_avg"`
	// BytesInUsePerService and ObjectsPerService are the average over the
	// rounds of the heap each round's services hold once reconciled
	// (after a GC, less what was in use before the round), as Cilium's
	// benchmark reports them; the first round's alone follow.
	BytesInUsePerService      float64 `json:"bytes_in_use_per_service"`
	ObjectsPerService         float64 `json:"objects_per_service"`
	BytesInUsePerServiceFirst float64 `json:"bytes_in_use_per_service_first_round"`
	ObjectsPerServiceFirst    float64 `json:"objects_per_service_first_round"`
	LatencyP50Ms              float64 `json:"latency_p50_ms,omitempty"`
	LatencyP99Ms              float64 `json:"latency_p99_ms,omitempty"`
	LatencyMaxMs              float64 `json:"latency_max_ms,omitempty"`
	PeakRSSBytes              int64   `json:"peak_rss_bytes,omitempty"`
	// KernelMapBytes is the memlock of the kernel maps with the first
	// round's services loaded (kernel maps only), KernelMaps each map's.
	KernelMapBytes int64       `json:"kernel_map_bytes,omitempty"`
	KernelMaps     []mapMemory `json:"kernel_maps,omitempty"`
	// Compare is set with -compare: the anchor's figures and our ratios.
	Compare *comparison `json:"compare,omitempty"`
}

type stats struct {
	Min float64 `json:"min"`
	Avg float64 `json:"avg"`
	Max float64 `json:"max"`
}

func main() {
	o, err := parseOptions(os.Args[1:], os.Stderr)
	if errors.Is(err, pflag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "lbbench:", err)
		os.Exit(2)
	}
	if spec := os.Getenv(restartEnv); spec != "" { // -restart's restarted pipeline
		if err := serveRestart(spec, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "lbbench restarted:", err)
			os.Exit(1)
		}
		return
	}
	if spec := os.Getenv(listenersEnv); spec != "" { // a child holding -health's backends
		if err := serveListeners(spec); err != nil {
			fmt.Fprintln(os.Stderr, "lbbench listeners:", err)
			os.Exit(1)
		}
		return
	}
	measure := run
	switch {
	case o.restart:
		measure = runRestart
		restartDefaults(&o)
	case o.healthMode:
		measure = runHealth
	case o.retainedMode:
		measure = runRetained
	case o.topology:
		measure = runTopology
		topologyDefaults(&o)
	case o.clusters > 0:
		measure = runClusters
		clustersDefaults(&o)
	case o.redirects > 0:
		measure = runRedirects
		if !o.given["services"] {
			o.services = 10000
		}
		if !o.given["iterations"] {
			o.iterations = 3
		}
	case o.routes > 0:
		measure = runRoutes
		topologyDefaults(&o) // the same size: 10,000 x 10
	}
	if err := measure(o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "lbbench:", err)
		os.Exit(1)
	}
}

func defaultMaps() string {
	if bpftest.Available() == nil {
		return "kernel"
	}
	return "memory"
}

// bench is one pipeline over fresh maps.
type bench struct {
	db        *statedb.DB
	w         *tables.Writer
	frontends statedb.Table[*lb.Frontend]
	backends  statedb.Table[*lb.Backend]
	rec       reconciler.Reconciler[*lb.Frontend]
	maps      *bpf.Maps
	refl      *k8s.Reflector
	lrp       *redirectpolicy.Controller // the redirect policies' source
	rts       *routes.Controller         // the routes' source
	stop      func()
}

func newBench(o options) (*bench, error) {
	b := &bench{}
	cfg := bpf.DefaultConfig
	if !o.defaultMapSizes {
		n := uint32(o.services)
		cfg.LBServicesMax = n*uint32(1+o.backends) + 1024 // room for the layout before inline slots too
		// A routed frontend has up to 256 weighted slots (the reconciler's
		// --lb-max-weighted-slots) and its services' backends on standby.
		cfg.LBServicesMax += uint32(o.routes) * (256 + 3*uint32(o.backends))
		cfg.LBBackendsMax = n*uint32(o.backends) + 1024
		cfg.LBRevNatMax = n + 1024
	}
	var pinRoot string
	if o.maps == "kernel" {
		// A directory of its own on /sys/fs/bpf, which bpf.Cell mounts if
		// need be, as it does for the agent.
		pinRoot = filepath.Join(bpftest.BPFFSRoot, fmt.Sprintf("lbbench-%d", os.Getpid()))
		if o.pinDir != "" {
			pinRoot = o.pinDir
		}
		cfg.LBPinDir = pinRoot
	}
	removePins := func() {
		if pinRoot != "" && !o.keepPins {
			os.RemoveAll(pinRoot)
		}
	}
	h := hive.New(append([]cell.Cell{
		lbstate.Core, // no sources: the bench drives a k8s reflector of its own
		cell.Invoke(func(db *statedb.DB, w *tables.Writer, fes statedb.Table[*lb.Frontend], bes statedb.Table[*lb.Backend],
			r reconciler.Reconciler[*lb.Frontend], m *bpf.Maps) {
			b.db, b.w, b.frontends, b.backends, b.rec, b.maps = db, w, fes, bes, r, m
		}),
	}, o.cells...)...)
	hive.AddConfigOverride(h, func(c *bpf.Config) { *c = cfg })
	hive.AddConfigOverride(h, func(c *bpf.ModeConfig) { c.LBMaps = o.maps })
	hive.AddConfigOverride(h, func(c *tables.HistoryConfig) { c.HistoryMaxBytes = o.historyMaxBytes })
	if o.configure != nil {
		o.configure(h)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// The sources register with the Writer before the hive starts, as an
	// agent's cells do in their constructors: the tables are not
	// initialized, so the reconciler prunes nothing, until they synced.
	// (A restarted pipeline whose sources came later saw its restored
	// entries pruned as nobody's.)
	if err := h.Populate(log); err != nil {
		removePins() // a failed populate may have pinned some maps
		return nil, err
	}
	kcfg := k8s.DefaultConfig
	kcfg = kcfg.WithNode("bench-node")
	src, err := reflectors.NewSource(b.w, lb.SourceK8s, log, nil)
	if err == nil {
		b.refl, err = k8s.NewReflector(kcfg, src, lb.SourceK8s)
	}
	var psrc, rsrc *reflectors.Source
	if err == nil {
		psrc, err = reflectors.NewSourceAs(b.w, lb.SourceK8s.String()+"-redirect-policies", lb.SourceK8s, log, nil)
	}
	if err == nil {
		rsrc, err = reflectors.NewSourceAs(b.w, lb.SourceK8s.String()+"-routes", lb.SourceK8s, log, nil)
	}
	if err == nil {
		err = h.Start(log, context.Background())
	}
	if err != nil {
		h.Stop(log, context.Background())
		removePins() // a failed start may have pinned some maps
		return nil, err
	}
	b.lrp = redirectpolicy.NewController(redirectpolicy.Options{}, kcfg.K8sNodeName, psrc, lb.SourceK8s, nil)
	b.rts = routes.NewController(rsrc, lb.SourceK8s, nil)
	refl := b.refl
	ctx, cancel := context.WithCancel(context.Background())
	// The benchmark pushes its objects itself, as a feed would.
	go refl.Run(ctx, func(context.Context) error {
		if o.initial != nil {
			o.initial(refl)
		}
		refl.Synced()
		return nil
	})
	go b.lrp.Run(ctx, func(context.Context) error { b.lrp.Synced(); return nil })
	go b.rts.Run(ctx, func(context.Context) error { b.rts.Synced(); return nil })
	b.stop = func() {
		cancel()
		h.Stop(log, context.Background())
		removePins()
	}
	return b, nil
}

func objects(i, backends int, generation int) (*corev1.Service, *discoveryv1.EndpointSlice) {
	name := fmt.Sprintf("svc-%d", i)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "bench"},
		Spec: corev1.ServiceSpec{
			ClusterIP: fmt.Sprintf("10.%d.%d.%d", 96+i>>16, (i>>8)&255, i&255),
			Ports:     []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}},
		},
	}
	port, proto := int32(8080+generation), corev1.ProtocolTCP
	es := &discoveryv1.EndpointSlice{
		// Named as the EndpointSlice controller names a service's slices.
		ObjectMeta:  metav1.ObjectMeta{Name: name + "-x7k2q", Namespace: "bench", Labels: map[string]string{k8s.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Port: &port, Protocol: &proto}},
	}
	for j := range backends {
		k := i*backends + j
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("11.%d.%d.%d", k>>16, (k>>8)&255, k&255)}})
	}
	return svc, es
}

// settle waits until the tables hold wantFrontends frontends and
// wantBackends backends and the reconciler has written them.
func (b *bench) settle(wantFrontends, wantBackends int) error {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		txn := b.db.ReadTxn()
		if b.frontends.NumObjects(txn) == wantFrontends && b.backends.NumObjects(txn) == wantBackends {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("the tables did not settle in 5 minutes")
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	return lbreconciler.WaitReconciled(ctx, b.rec, b.frontends.Revision(b.db.ReadTxn()))
}

// countEntries reads m to count its entries: the check is of what the
// kernel holds, so not bpf.Count, which answers for a dense ID map from
// what this process wrote.
func countEntries[K comparable, V any](m bpf.Map[K, V]) int {
	n := 0
	m.Iterate(func(K, V) bool { n++; return true })
	return n
}

func run(o options, out io.Writer) error {
	if o.services < 1 || o.backends < 0 || o.iterations < 1 {
		return errors.New("-services and -iterations must be at least 1, -backends at least 0")
	}
	if o.services >= 1<<20 {
		return errors.New("-services: at most 1048575")
	}
	if o.services*o.backends >= 1<<24 {
		return errors.New("-services times -backends: at most 16777215 backends")
	}
	if o.latency && o.backends == 0 {
		return errors.New("-latency needs -backends of at least 1: it times backend changes")
	}
	switch {
	case o.profilePhase != "" && o.profilePhase != "insert" && o.profilePhase != "delete":
		return fmt.Errorf("-profile-phase %q: insert or delete", o.profilePhase)
	case o.profilePhase != "" && (o.cpuProfile == "" || o.iterations < 2):
		return errors.New("-profile-phase needs -cpuprofile and -iterations of at least 2: the first round is not profiled")
	}
	var base *anchor
	if o.compare != "" {
		a, err := readAnchor(o.compare)
		if err != nil {
			return err
		}
		base = &a
	}
	if o.memProfile != "" {
		// Finer than the default (512 KiB) so that the profile accounts
		// for every few bytes per service.
		runtime.MemProfileRate = 4096
	}
	b, err := newBench(o)
	if err != nil {
		return err
	}
	defer b.stop()
	wholeProfile := o.cpuProfile
	if o.profilePhase != "" {
		wholeProfile = "" // each round's phase apart (phaseProfile)
	}
	stopProfile, err := startCPUProfile(wholeProfile)
	if err != nil {
		return err
	}
	defer stopProfile()

	// The objects exist before the clock starts and before the memory
	// baseline, as they exist in an informer's store before its handlers
	// see them: what is measured is the pipeline's own cost.
	svcs := make([]*corev1.Service, o.services)
	eps := make([]*discoveryv1.EndpointSlice, o.services)
	for i := range o.services {
		svcs[i], eps[i] = objects(i, o.backends, 0)
	}
	stopTrace, err := startTrace(o.trace)
	if err != nil {
		return err
	}
	defer stopTrace()

	res := result{Maps: b.maps.Kind, Services: o.services, BackendsPerService: o.backends}
	fmt.Fprintf(out, "lbbench: %d services x %d backends, %s maps, %d iterations\n", o.services, o.backends, b.maps.Kind, o.iterations)
	var inserts, deletes, heaps, objs []float64
	for it := range o.iterations {
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)

		region := trace.StartRegion(context.Background(), "insert")
		stopPhase := o.phaseProfile("insert", it)
		start := time.Now()
		for i := range o.services {
			b.refl.Push(svcs[i], false)
			b.refl.Push(eps[i], false)
		}
		if err := b.settle(o.services, o.services*o.backends); err != nil {
			return err
		}
		insert := time.Since(start)
		stopPhase()
		region.End()
		if got, want := countEntries(b.maps.Services), o.services*(1+bpf.SlotEntries(o.backends)); got != want {
			return fmt.Errorf("after insert lb_services has %d entries, want %d", got, want)
		}

		// Every round's heap in use, as Cilium's benchmark measures it
		// (the summary is their average, like its "Avg:" line).
		var after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&after)
		heaps = append(heaps, float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(o.services))
		objs = append(objs, float64(int64(after.HeapObjects)-int64(before.HeapObjects))/float64(o.services))
		if it == 0 {
			if b.maps.Kind == "kernel" {
				res.KernelMaps, res.KernelMapBytes = kernelMapMemory()
				fmt.Fprintf(out, "  kernel maps with the services loaded: %.1f MiB (memlock)%s\n", float64(res.KernelMapBytes)/(1<<20), largestMaps(res.KernelMaps, 3))
			}
			if o.memProfile != "" {
				if f, err := os.Create(o.memProfile); err == nil {
					pprof.WriteHeapProfile(f)
					f.Close()
				}
			}
			if o.latency {
				if err := b.measureLatency(o, &res, out); err != nil {
					return err
				}
			}
		}

		region = trace.StartRegion(context.Background(), "delete")
		stopPhase = o.phaseProfile("delete", it)
		start = time.Now()
		for i := range o.services {
			b.refl.Push(eps[i], true)
			b.refl.Push(svcs[i], true)
		}
		if err := b.settle(0, 0); err != nil {
			return err
		}
		del := time.Since(start)
		stopPhase()
		region.End()
		if got := countEntries(b.maps.Services) + countEntries(b.maps.Backends); got != 0 {
			return fmt.Errorf("after delete the maps hold %d entries", got)
		}
		ins, dls := float64(o.services)/insert.Seconds(), float64(o.services)/del.Seconds()
		inserts, deletes = append(inserts, ins), append(deletes, dls)
		fmt.Fprintf(out, "  round %d: insert %8.0f services/s (%s), delete %8.0f services/s (%s), heap %.0f B %.1f objects per service\n",
			it+1, ins, insert.Round(time.Millisecond), dls, del.Round(time.Millisecond), heaps[it], objs[it])
	}
	res.InsertServicesPerSec, res.DeleteServicesPerSec = summarize(inserts), summarize(deletes)
	res.BytesInUsePerService, res.ObjectsPerService = summarize(heaps).Avg, summarize(objs).Avg
	res.BytesInUsePerServiceFirst, res.ObjectsPerServiceFirst = heaps[0], objs[0]
	res.InsertServicesPerSecAv, res.DeleteServicesPerSecAv = res.InsertServicesPerSec.Avg, res.DeleteServicesPerSec.Avg
	fmt.Fprintf(out, "insert: min %.0f avg %.0f max %.0f services/s\n", res.InsertServicesPerSec.Min, res.InsertServicesPerSec.Avg, res.InsertServicesPerSec.Max)
	fmt.Fprintf(out, "delete: min %.0f avg %.0f max %.0f services/s\n", res.DeleteServicesPerSec.Min, res.DeleteServicesPerSec.Avg, res.DeleteServicesPerSec.Max)
	fmt.Fprintf(out, "heap in use: %.0f bytes and %.1f objects per service (average of the rounds; first round %.0f bytes, %.1f objects)\n",
		res.BytesInUsePerService, res.ObjectsPerService, res.BytesInUsePerServiceFirst, res.ObjectsPerServiceFirst)
	if res.PeakRSSBytes = peakRSS(); res.PeakRSSBytes > 0 {
		fmt.Fprintf(out, "peak RSS: %.1f MiB\n", float64(res.PeakRSSBytes)/(1<<20))
	}
	if base != nil {
		res.Compare = compare(res, *base, out)
	}
	if o.json {
		js, _ := json.Marshal(res)
		fmt.Fprintln(out, string(js))
	}
	return nil
}

// measureLatency updates one EndpointSlice at a time (a new endpoint
// port) and times each from the hand-over to the frontend being
// reconciled with it.
func (b *bench) measureLatency(o options, res *result, out io.Writer) error {
	var lat []time.Duration
	for u := range o.updates {
		i := (u * 7919) % o.services
		_, es := objects(i, o.backends, u+1)
		want := uint16(8080 + u + 1)
		addr := lb.MustParseL3n4Addr(fmt.Sprintf("10.%d.%d.%d:80/TCP", 96+i>>16, (i>>8)&255, i&255))
		start := time.Now()
		b.refl.Push(es, false)
		for {
			fe, _, watch, found := b.frontends.GetWatch(b.db.ReadTxn(), tables.FrontendByAddress.Query(addr))
			if found && fe.Status.Kind == reconciler.StatusKindDone && (o.backends == 0 || len(fe.Backends) > 0 && fe.Backends[0].Address.Port() == want) {
				break
			}
			select {
			case <-watch:
			case <-time.After(10 * time.Second):
				return fmt.Errorf("update %d of %s not reconciled in 10s", u, addr)
			}
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	res.LatencyP50Ms, res.LatencyP99Ms, res.LatencyMaxMs = ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100]), ms(lat[len(lat)-1])
	fmt.Fprintf(out, "latency over %d single-slice updates: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", len(lat), res.LatencyP50Ms, res.LatencyP99Ms, res.LatencyMaxMs)
	return nil
}

// peakRSS returns the process's peak resident set size (VmHWM), or 0
// where /proc does not tell.
func peakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb)
			return kb << 10
		}
	}
	return 0
}

func summarize(xs []float64) stats {
	s := stats{Min: xs[0], Max: xs[0]}
	for _, x := range xs {
		s.Min, s.Max = min(s.Min, x), max(s.Max, x)
		s.Avg += x / float64(len(xs))
	}
	return s
}

// push hands an object to the sources that read its kind, as a feed
// would: policies to the redirect policies' source, pods to it and to the
// services source (host ports), routes to the routes' source, the rest to
// the services source.
func (b *bench) push(obj any, deleted bool) {
	if _, ok := routes.KeyOf(obj); ok {
		b.rts.Push(obj, deleted)
		return
	}
	switch obj.(type) {
	case *redirectpolicy.Policy:
		b.lrp.Push(obj, deleted)
	case *corev1.Pod:
		b.lrp.Push(obj, deleted)
		b.refl.Push(obj, deleted)
	default:
		b.refl.Push(obj, deleted)
	}
}
