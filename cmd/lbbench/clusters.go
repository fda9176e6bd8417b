package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"time"

	"github.com/cilium/statedb/reconciler"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/reflectors/clustermesh"
	"github.com/lbstate/lbstate/tables"
)

// -clusters N: N remote clusters, each sharing -services global services
// of -backends backends in one etcd (in this process, on loopback),
// merged into as many local global services of -backends backends each.
// Measured: the time from the importer's start until every merged
// frontend is in the maps, the heap that adds per remote backend, the
// watch events per second it applies while every remote service changes,
// and the latency of one remote backend change into the maps.

type clustersResult struct {
	Maps                  string  `json:"maps"`
	Clusters              int     `json:"clusters"`
	Services              int     `json:"services"`
	BackendsPerService    int     `json:"backends_per_service"`
	RemoteBackends        int     `json:"remote_backends"`
	PublishSeconds        float64 `json:"publish_seconds"`
	ConvergeSeconds       float64 `json:"converge_seconds"`
	ConvergeCPUSeconds    float64 `json:"converge_cpu_seconds"`
	HeapBytesPerRemote    float64 `json:"heap_bytes_per_remote_backend"`
	WatchEvents           int     `json:"watch_events"`
	WatchSeconds          float64 `json:"watch_seconds"`
	WatchCPUSeconds       float64 `json:"watch_cpu_seconds"`
	WatchEventsPerSec     float64 `json:"watch_events_per_sec"`
	PublishEventsPerSec   float64 `json:"publish_events_per_sec"`
	Latency               latency `json:"latency"`
	LatencyAfterChurn     latency `json:"latency_after_churn"`
	PeakRSSBytes          int64   `json:"peak_rss_bytes,omitempty"`
	LoadAverageAtTheStart string  `json:"load_average_at_start,omitempty"`
}

func clustersDefaults(o *options) {
	topologyDefaults(o) // 10,000 services x 10 backends unless given
}

func clusterName(c int) string { return fmt.Sprintf("cluster-%d", c) }

// remoteAddr is cluster c's backend j of service i, at port.
func remoteAddr(c, i, j, backends int) string {
	k := i*backends + j
	return fmt.Sprintf("%d.%d.%d.%d", 20+c, k>>16, (k>>8)&255, k&255)
}

// clusterService is cluster c's service i, its backends at port (the
// first one at firstPort instead, for single changes).
func clusterService(c, i, backends int, port, firstPort uint16) []byte {
	s := clustermesh.ClusterService{
		Cluster: clusterName(c), Namespace: "bench", Name: fmt.Sprintf("svc-%d", i),
		Frontends: map[string]clustermesh.PortConfiguration{},
		Backends:  map[string]clustermesh.PortConfiguration{},
		Labels:    map[string]string{}, Selector: map[string]string{},
		IncludeExternal: true, Shared: true, ClusterID: uint32(c),
	}
	for j := range backends {
		p := port
		if j == 0 {
			p = firstPort
		}
		s.Backends[remoteAddr(c, i, j, backends)] = clustermesh.PortConfiguration{"": {Protocol: "TCP", Port: p}}
	}
	data, _ := json.Marshal(&s)
	return data
}

func runClusters(o options, out io.Writer) error {
	n := o.clusters
	if n < 1 || n > 200 || o.services < 1 || o.backends < 1 || o.updates < 1 {
		return errors.New("-clusters needs 1-200 clusters, and -services, -backends and -updates of at least 1")
	}
	if o.services*o.backends >= 1<<24 {
		return errors.New("-services times -backends: at most 16777215")
	}
	res := clustersResult{Clusters: n, Services: o.services, BackendsPerService: o.backends, RemoteBackends: n * o.services * o.backends, LoadAverageAtTheStart: loadAverage()}

	endpoint, stopEtcd, err := startEtcd()
	if err != nil {
		return err
	}
	defer stopEtcd()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer cli.Close()

	// Room in the maps for every backend of every cluster, twice: while
	// every remote backend moves to a new port, old and new are both in.
	sized := o
	sized.backends = 2 * o.backends * (1 + n)
	b, err := newBench(sized)
	if err != nil {
		return err
	}
	defer b.stop()
	res.Maps = b.maps.Kind
	fmt.Fprintf(out, "lbbench -clusters: %d remote clusters x %d global services x %d backends (%d remote backends) in one etcd, merged into %d local global services of %d backends, %s maps; load average %s\n",
		n, o.services, o.backends, res.RemoteBackends, o.services, o.backends, b.maps.Kind, res.LoadAverageAtTheStart)

	// The local global services, in the maps before anything is measured.
	for i := range o.services {
		svc, es := objects(i, o.backends, 0)
		svc.Annotations = map[string]string{lb.AnnotationGlobal: "true"}
		b.refl.Push(svc, false)
		b.refl.Push(es, false)
	}
	if err := b.settle(o.services, o.services*o.backends); err != nil {
		return err
	}

	// Every cluster's services and its synced key, before the importer
	// starts: an agent joining a mesh that is there.
	start := time.Now()
	if err := publish(cli, n, o.services, o.backends, 8080, 8080); err != nil {
		return err
	}
	for c := 1; c <= n; c++ {
		if _, err := cli.Put(context.Background(), clustermesh.SyncedKey(clusterName(c)), "true"); err != nil {
			return err
		}
	}
	res.PublishSeconds = time.Since(start).Seconds()
	fmt.Fprintf(out, "published %d services in %s\n", n*o.services, time.Since(start).Round(time.Millisecond))

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if o.memProfile != "" { // the base for pprof -diff_base
		writeHeapProfile(o.memProfile + ".base")
	}
	// The convergence and the rest (watch events, single changes) are
	// profiled apart: -cpuprofile PATH and PATH.watch.
	stopProfile, err := startCPUProfile(o.cpuProfile)
	if err != nil {
		return err
	}
	defer func() { stopProfile() }()

	remotes := make([]clustermesh.Remote, n)
	for c := 1; c <= n; c++ {
		remotes[c-1] = clustermesh.Remote{Name: clusterName(c), ID: uint32(c), Etcd: clientv3.Config{Endpoints: []string{endpoint}}}
	}
	im, err := clustermesh.NewImporter(clustermesh.Self{}, remotes...)
	if err != nil {
		return err
	}
	src, err := reflectors.NewSource(b.w, lb.SourceKVStore, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start, cpu0 := time.Now(), cpuTime()
	go im.Run(ctx, src)
	if err := b.settle(o.services, o.services*o.backends*(1+n)); err != nil {
		return err
	}
	converge := time.Since(start)
	res.ConvergeSeconds = converge.Seconds()
	res.ConvergeCPUSeconds = (cpuTime() - cpu0).Seconds()
	stopProfile()
	stopProfile = func() {} // stopped: the deferred call must not stop it again
	if o.cpuProfile != "" {
		stop, err := startCPUProfile(o.cpuProfile + ".watch")
		if err != nil { // (stopProfile stays set: a nil one would panic when deferred)
			return err
		}
		stopProfile = stop
	}
	fmt.Fprintf(out, "converged: every frontend with its %d backends in the maps %s after the importer started, using %.2f s of CPU (this process's, etcd's included: on a machine of its own, the wall time's floor is that over the cores)\n",
		o.backends*(1+n), converge.Round(time.Millisecond), res.ConvergeCPUSeconds)

	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	res.HeapBytesPerRemote = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(res.RemoteBackends)
	fmt.Fprintf(out, "heap: %.0f bytes per remote backend (%.0f MiB for %d)\n", res.HeapBytesPerRemote,
		float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), res.RemoteBackends)
	if o.memProfile != "" {
		writeHeapProfile(o.memProfile)
	}

	// Every remote service changes (a new port): one watch event each,
	// as fast as etcd takes them. Each cluster's are written in order, so
	// its last service with the new port means all of them are in.
	start, cpu0 = time.Now(), cpuTime()
	var published time.Duration
	var pubErr error
	done := make(chan struct{})
	go func() {
		pubErr = publish(cli, n, o.services, o.backends, 8081, 8081)
		published = time.Since(start)
		close(done)
	}()
	for c := 1; c <= n; c++ {
		if err := b.waitBackend(o.services-1, lb.MustParseL3n4Addr(remoteAddr(c, o.services-1, 0, o.backends)+":8081/TCP"), 5*time.Minute); err != nil {
			return err
		}
	}
	<-done
	if pubErr != nil {
		return pubErr
	}
	watch := time.Since(start)
	res.WatchCPUSeconds = (cpuTime() - cpu0).Seconds()
	res.WatchEvents = n * o.services
	res.WatchSeconds = watch.Seconds()
	res.WatchEventsPerSec = float64(res.WatchEvents) / watch.Seconds()
	res.PublishEventsPerSec = float64(res.WatchEvents) / published.Seconds()
	fmt.Fprintf(out, "watch: %d events (%d backends each) applied and in the maps in %s: %.0f events/s (etcd took the writes at %.0f/s), using %.2f s of CPU (%.0f us an event, the publisher's and etcd's included)\n",
		res.WatchEvents, o.backends, watch.Round(time.Millisecond), res.WatchEventsPerSec, res.PublishEventsPerSec,
		res.WatchCPUSeconds, 1e6*res.WatchCPUSeconds/float64(res.WatchEvents))

	// One remote backend at a time moves to a new port: first right after
	// the churn above, while the collector may still be busy with its
	// garbage, then from a collected heap.
	afterChurn, err := b.singleChanges(cli, o, n, 0)
	if err != nil {
		return err
	}
	runtime.GC()
	quiet, err := b.singleChanges(cli, o, n, o.updates)
	if err != nil {
		return err
	}
	res.LatencyAfterChurn, res.Latency = afterChurn, quiet
	for _, l := range []struct {
		what string
		l    latency
	}{{"right after the churn", afterChurn}, {"from a collected heap", quiet}} {
		fmt.Fprintf(out, "latency of one remote backend change, etcd put to the maps, %s, over %d: p50 %.2f ms, p99 %.2f ms, max %.2f ms (%d GC cycles meanwhile)\n",
			l.what, o.updates, l.l.P50Ms, l.l.P99Ms, l.l.MaxMs, l.l.GCCycles)
	}
	if res.PeakRSSBytes = peakRSS(); res.PeakRSSBytes > 0 {
		fmt.Fprintf(out, "peak RSS: %.1f MiB (etcd included)\n", float64(res.PeakRSSBytes)/(1<<20))
	}
	fmt.Fprintf(out, "load average at the end: %s\n", loadAverage())
	if o.json {
		js, _ := json.Marshal(res)
		fmt.Fprintln(out, string(js))
	}
	return nil
}

// waitBackend waits until service i's frontend is reconciled with addr
// among its backends.
func (b *bench) waitBackend(i int, addr lb.L3n4Addr, timeout time.Duration) error {
	fa := lb.MustParseL3n4Addr(fmt.Sprintf("10.%d.%d.%d:80/TCP", 96+i>>16, (i>>8)&255, i&255))
	deadline := time.After(timeout)
	for {
		fe, _, watch, found := b.frontends.GetWatch(b.db.ReadTxn(), tables.FrontendByAddress.Query(fa))
		if found && fe.Status.Kind == reconciler.StatusKindDone &&
			slices.ContainsFunc(fe.Backends, func(r lb.BackendRef) bool { return r.Address == addr }) {
			return nil
		}
		select {
		case <-watch:
		case <-deadline:
			return fmt.Errorf("%s not in %s's maps in %s", addr, fa, timeout)
		}
	}
}

// publish writes every cluster's services, one writer per cluster, in
// transactions of etcd's default limit of 128 operations, each
// cluster's in order.
func publish(cli *clientv3.Client, clusters, services, backends int, port, firstPort uint16) error {
	const perTxn = 128
	errs := make([]error, clusters)
	var wg sync.WaitGroup
	for c := 1; c <= clusters; c++ {
		wg.Go(func() {
			ops := make([]clientv3.Op, 0, perTxn)
			flush := func() error {
				if len(ops) == 0 {
					return nil
				}
				_, err := cli.Txn(context.Background()).Then(ops...).Commit()
				ops = ops[:0]
				return err
			}
			for i := range services {
				key := clustermesh.ServiceKey(clusterName(c), "bench", fmt.Sprintf("svc-%d", i))
				ops = append(ops, clientv3.OpPut(key, string(clusterService(c, i, backends, port, firstPort))))
				if len(ops) == perTxn {
					if err := flush(); err != nil {
						errs[c-1] = err
						return
					}
				}
			}
			errs[c-1] = flush()
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// startEtcd runs a single-member etcd on loopback ports, in a temporary
// directory, without fsync (what is measured is the importer).
func startEtcd() (endpoint string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "lbbench-etcd-")
	if err != nil {
		return "", nil, err
	}
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.LogLevel = "fatal"
	cfg.UnsafeNoFsync = true
	cfg.QuotaBackendBytes = 8 << 30
	urls := make([]url.URL, 2)
	for i := range urls {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			os.RemoveAll(dir)
			return "", nil, err
		}
		urls[i] = url.URL{Scheme: "http", Host: l.Addr().String()}
		l.Close()
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = urls[:1], urls[:1]
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = urls[1:], urls[1:]
	cfg.InitialCluster = cfg.Name + "=" + urls[1].String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		os.RemoveAll(dir)
		return "", nil, errors.New("etcd not ready in 30s")
	}
	return urls[0].String(), func() { e.Close(); os.RemoveAll(dir) }, nil
}

// loadAverage is /proc/loadavg's first three fields, or empty.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	var a, b, c string
	fmt.Sscan(string(data), &a, &b, &c)
	return a + " " + b + " " + c
}

func writeHeapProfile(path string) {
	if f, err := os.Create(path); err == nil {
		pprof.WriteHeapProfile(f)
		f.Close()
	}
}

// latency sums up the times of single changes.
type latency struct {
	P50Ms    float64 `json:"p50_ms"`
	P99Ms    float64 `json:"p99_ms"`
	MaxMs    float64 `json:"max_ms"`
	GCCycles int     `json:"gc_cycles"` // collections that ran meanwhile
}

// singleChanges moves one remote backend at a time to a new port
// (-updates of them, the first numbered from) and times each from the
// etcd put until its frontend is reconciled with it.
func (b *bench) singleChanges(cli *clientv3.Client, o options, clusters, from int) (latency, error) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	lat := make([]time.Duration, 0, o.updates)
	for u := from; u < from+o.updates; u++ {
		c, i := 1+u%clusters, (u*7919)%o.services
		port := uint16(9000 + u%50000) // new to service i: i repeats only after -services updates
		addr := lb.MustParseL3n4Addr(fmt.Sprintf("%s:%d/TCP", remoteAddr(c, i, 0, o.backends), port))
		value := string(clusterService(c, i, o.backends, 8081, port))
		t0 := time.Now()
		if _, err := cli.Put(context.Background(), clustermesh.ServiceKey(clusterName(c), "bench", fmt.Sprintf("svc-%d", i)), value); err != nil {
			return latency{}, err
		}
		if err := b.waitBackend(i, addr, 10*time.Second); err != nil {
			return latency{}, fmt.Errorf("update %d: %w", u, err)
		}
		lat = append(lat, time.Since(t0))
	}
	runtime.ReadMemStats(&after)
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return latency{
		P50Ms: ms(lat[len(lat)/2]), P99Ms: ms(lat[len(lat)*99/100]), MaxMs: ms(lat[len(lat)-1]),
		GCCycles: int(after.NumGC - before.NumGC),
	}, nil
}
