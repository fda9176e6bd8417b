package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math/bits"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/metrics"
	lbreconciler "github.com/lbstate/lbstate/reconciler"
	"github.com/lbstate/lbstate/reflectors/k8s"
)

// --restart: a node agent restarts far more often than it starts cold
// (upgrades, crashes), and every entry it rewrites is churn under live
// traffic. The bench loads services x backends into pinned kernel maps
// with one pipeline, stops it, and starts a fresh one in a child process
// (so that its peak RSS is the restarted agent's alone) over the same pins
// and the same declarations; the child reports when it was synced and
// pruned and what it wrote, and this process checks that the maps hold
// exactly what they held before (so every ID was kept).

// restartEnv, set in a child's environment, makes lbbench the restarted
// pipeline: "pin dir,services,backends,CPU profile file,trace file" (the
// files empty when not wanted).
const restartEnv = "LBBENCH_RESTART"

// restartResult is the child's report, and the JSON summary.
type restartResult struct {
	Maps     string `json:"maps"`
	Services int    `json:"services"`
	Backends int    `json:"backends_per_service"`
	// From the child's start: its hive started (maps opened; restore
	// runs from there on, beside the source's listing), every
	// declaration reconciled with the source synced, the first prune
	// done, and both.
	StartedSeconds float64 `json:"started_seconds"`
	// CPUSeconds is the CPU time (user and system) the child spent from
	// its start until synced and pruned: on a busy machine, a figure
	// that the other work's share of the cores does not change much.
	CPUSeconds    float64 `json:"cpu_seconds"`
	SyncedSeconds float64 `json:"synced_seconds"`
	PrunedSeconds float64 `json:"pruned_seconds"`
	ReadySeconds  float64 `json:"synced_and_pruned_seconds"`
	// Writes are lbstate_map_writes_total by map, WritesTotal their sum.
	Writes       map[string]uint64 `json:"writes"`
	WritesTotal  uint64            `json:"writes_total"`
	PeakRSSBytes int64             `json:"peak_rss_bytes"`
	// LoadSeconds is the first pipeline's time to load; MapsUnchanged
	// says the maps held the same entries before and after the restart.
	LoadSeconds   float64 `json:"load_seconds"`
	MapsUnchanged bool    `json:"maps_unchanged"`
}

func restartDefaults(o *options) {
	if !o.given["services"] {
		o.services = 100000
	}
	if !o.given["backends"] {
		o.backends = 10
	}
}

// runRestart is --restart.
func runRestart(o options, out io.Writer) error {
	if o.maps != "kernel" {
		return errors.New("-restart needs kernel maps: what it measures is a new process over pinned maps")
	}
	if o.services < 1 || o.backends < 1 {
		return errors.New("-restart: -services and -backends must be at least 1")
	}
	if o.services >= 1<<20 || o.services*o.backends >= 1<<24 {
		return errors.New("-restart: at most 1048575 services and 16777215 backends")
	}
	pinDir := o.pinDir
	if pinDir == "" {
		pinDir = filepath.Join(bpftest.BPFFSRoot, fmt.Sprintf("lbbench-%d", os.Getpid()))
	}
	defer os.RemoveAll(pinDir)
	o.pinDir, o.keepPins = pinDir, true

	fmt.Fprintf(out, "lbbench: restart over %d services x %d backends in pinned kernel maps\n", o.services, o.backends)
	start := time.Now()
	if err := loadPinned(o); err != nil {
		return err
	}
	load := time.Since(start)
	before, err := fingerprintPins(pinDir)
	if err != nil {
		return err
	}

	res, err := restartChild(o)
	if err != nil {
		return err
	}
	after, err := fingerprintPins(pinDir)
	if err != nil {
		return err
	}
	res.LoadSeconds, res.MapsUnchanged = load.Seconds(), before == after
	fmt.Fprintf(out, "  loaded in %.2fs; restarted: hive started %.3fs, synced %.3fs, pruned %.3fs: synced and pruned %.3fs after start, %.2fs of CPU\n",
		res.LoadSeconds, res.StartedSeconds, res.SyncedSeconds, res.PrunedSeconds, res.ReadySeconds, res.CPUSeconds)
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range res.Writes {
			if !yield(n) {
				return
			}
		}
	})
	var ws []string
	for _, n := range names {
		ws = append(ws, fmt.Sprintf("%s %d", n, res.Writes[n]))
	}
	fmt.Fprintf(out, "  entries written by the restarted pipeline: %d (%s)\n", res.WritesTotal, strings.Join(ws, ", "))
	fmt.Fprintf(out, "  peak RSS of the restarted pipeline: %.1f MiB\n", float64(res.PeakRSSBytes)/(1<<20))
	if !res.MapsUnchanged {
		fmt.Fprintf(out, "  maps changed across the restart:\n    before %v\n    after  %v\n", before, after)
	}
	if o.json {
		js, _ := json.Marshal(res)
		fmt.Fprintln(out, string(js))
	}
	if !res.MapsUnchanged {
		return errors.New("the maps changed across a restart over the same declarations")
	}
	return nil
}

// loadPinned loads the services into kernel maps pinned in o.pinDir, and
// stops the pipeline, leaving them pinned.
func loadPinned(o options) error {
	o.initial = func(r *k8s.Reflector) { pushAll(r, o.services, o.backends) }
	b, err := newBench(o)
	if err != nil {
		return err
	}
	defer b.stop()
	return b.settle(o.services, o.services*o.backends)
}

func pushAll(r *k8s.Reflector, services, backends int) {
	for i := range services {
		svc, es := objects(i, backends, 0)
		r.Push(svc, false)
		r.Push(es, false)
	}
}

// restartChild runs the restarted pipeline in a child process of the
// same binary, and returns its report.
func restartChild(o options) (restartResult, error) {
	self, err := os.Executable()
	if err != nil {
		return restartResult{}, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d,%d,%s,%s", restartEnv, o.pinDir, o.services, o.backends, o.cpuProfile, o.trace))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return restartResult{}, fmt.Errorf("restarted pipeline: %w\n%s", err, stderr.String())
	}
	var res restartResult
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &res); err != nil {
		return res, fmt.Errorf("restarted pipeline's report: %w\n%s", err, stdout.String())
	}
	return res, nil
}

// serveRestart is the child: spec is restartEnv's value.
func serveRestart(spec string, out io.Writer) error {
	parts := strings.SplitN(spec, ",", 5)
	if len(parts) != 5 {
		return fmt.Errorf("%s=%q: want pin dir,services,backends,CPU profile,trace", restartEnv, spec)
	}
	services, err1 := strconv.Atoi(parts[1])
	backends, err2 := strconv.Atoi(parts[2])
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("%s=%q: %w", restartEnv, spec, err)
	}
	res, err := restarted(options{services: services, backends: backends, maps: "kernel", pinDir: parts[0], keepPins: true, cpuProfile: parts[3], trace: parts[4]})
	if err != nil {
		return err
	}
	return json.NewEncoder(out).Encode(res)
}

// restarted starts a pipeline over the maps pinned in o.pinDir, its
// reflector listing the same objects, and times it to synced and pruned.
func restarted(o options) (restartResult, error) {
	res := restartResult{Maps: "kernel", Services: o.services, Backends: o.backends}
	// The objects exist before the clock starts, as in an informer's
	// store.
	type pair struct{ svc, es any }
	objs := make([]pair, o.services)
	for i := range objs {
		svc, es := objects(i, o.backends, 0)
		objs[i] = pair{svc, es}
	}
	// With the registry an agent has; gathered once at the end, as a
	// gather of a million backends' series costs seconds.
	var (
		reg *prometheus.Registry
		rm  *lbreconciler.Metrics
	)
	o.cells = []cell.Cell{metrics.Cell, cell.Invoke(func(r *prometheus.Registry, m *lbreconciler.Metrics) { reg, rm = r, m })}
	o.initial = func(r *k8s.Reflector) {
		for _, p := range objs {
			r.Push(p.svc, false)
			r.Push(p.es, false)
		}
	}
	// Of the restarted pipeline until synced and pruned: not the gather
	// and the teardown after it, which the CPU time leaves out too.
	stopCPUProfile, err := startCPUProfile(o.cpuProfile)
	if err != nil {
		return res, err
	}
	stopTrace, err := startTrace(o.trace)
	if err != nil {
		stopCPUProfile()
		return res, err
	}
	stopProfile := func() { stopTrace(); stopCPUProfile() }
	profiling := true
	defer func() {
		if profiling {
			stopProfile()
		}
	}()
	cpuStart := cpuTime()
	start := time.Now()
	b, err := newBench(o)
	if err != nil {
		return res, err
	}
	defer b.stop()
	res.StartedSeconds = time.Since(start).Seconds()

	synced, pruned := time.Duration(0), time.Duration(0)
	deadline := start.Add(5 * time.Minute)
	for synced == 0 || pruned == 0 {
		if time.Now().After(deadline) {
			return res, errors.New("the restarted pipeline was not synced and pruned in 5 minutes")
		}
		if synced == 0 && b.syncedAndReconciled(o.services, o.services*o.backends) {
			synced = time.Since(start)
		}
		if pruned == 0 && rm.Prunes() > 0 {
			pruned = time.Since(start)
		}
		time.Sleep(time.Millisecond)
	}
	res.SyncedSeconds, res.PrunedSeconds = synced.Seconds(), pruned.Seconds()
	res.ReadySeconds = max(synced, pruned).Seconds()
	res.CPUSeconds = (cpuTime() - cpuStart).Seconds()
	stopProfile()
	profiling = false
	res.PeakRSSBytes = peakRSS() // before the gather, which costs more than the pipeline
	if res.Writes, err = writesByMap(reg); err != nil {
		return res, err
	}
	for _, n := range res.Writes {
		res.WritesTotal += n
	}
	return res, nil
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// syncedAndReconciled reports whether the tables hold the frontends and
// backends, every source has synced, and the reconciler has written
// every change.
func (b *bench) syncedAndReconciled(frontends, backends int) bool {
	txn := b.db.ReadTxn()
	if init, _ := b.frontends.Initialized(txn); !init ||
		b.frontends.NumObjects(txn) != frontends || b.backends.NumObjects(txn) != backends {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	done, retryLow, err := b.rec.WaitUntilReconciled(ctx, b.frontends.Revision(txn))
	return err == nil && done >= b.frontends.Revision(txn) && retryLow == 0
}

// writesByMap reads lbstate_map_writes_total.
func writesByMap(g prometheus.Gatherer) (map[string]uint64, error) {
	fams, err := g.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for _, f := range fams {
		if f.GetName() != "lbstate_map_writes_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			out[labelValue(m, "map")] = uint64(m.GetCounter().GetValue())
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no lbstate_map_writes_total in the registry")
	}
	return out, nil
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// mapsPrint is what the maps hold, per map: entries and a sum of their
// hashes (order-independent), so that two prints are equal when the
// maps hold the same entries, without keeping a copy of millions of them.
type mapsPrint [6]struct {
	n   int
	sum uint64
}

var printSeed = maphash.MakeSeed()

// fingerprintPins prints the maps the reconciler writes, pinned in dir.
func fingerprintPins(dir string) (mapsPrint, error) {
	var p mapsPrint
	maps, err := bpf.OpenPinnedMaps(dir)
	if err != nil {
		return p, err
	}
	defer maps.Close()
	err = errors.Join(
		fingerprint(maps.Services, &p[0].n, &p[0].sum),
		fingerprint(maps.Backends, &p[1].n, &p[1].sum),
		fingerprint(maps.RevNat, &p[2].n, &p[2].sum),
		fingerprint(maps.Affinity, &p[3].n, &p[3].sum),
		fingerprint(maps.SourceRanges, &p[4].n, &p[4].sum),
		maps.Maglev.Iterate(func(id uint32, table []uint32) bool {
			p[5].n++
			p[5].sum += maphash.Comparable(printSeed, id) ^ bits.RotateLeft64(maphash.Bytes(printSeed, u32Bytes(table)), 1)
			return true
		}),
	)
	return p, err
}

func fingerprint[K, V comparable](m bpf.Map[K, V], n *int, sum *uint64) error {
	return m.Iterate(func(k K, v V) bool {
		*n++
		*sum += maphash.Comparable(printSeed, k) ^ bits.RotateLeft64(maphash.Comparable(printSeed, v), 1)
		return true
	})
}

func u32Bytes(xs []uint32) []byte {
	out := make([]byte, 0, 4*len(xs))
	for _, x := range xs {
		out = append(out, byte(x), byte(x>>8), byte(x>>16), byte(x>>24))
	}
	return out
}
