package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb/reconciler"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/metrics"
	lbreconciler "github.com/lbstate/lbstate/reconciler"
	"github.com/lbstate/lbstate/reflectors/health"
	"github.com/lbstate/lbstate/tables"
)

// healthOptions are -health's.
type healthOptions struct {
	backends int           // probed, 10 per service
	interval time.Duration // between probes of a backend
	window   time.Duration // measured, after a warm-up of two intervals
	fail     int           // backends stopped to time their trips
}

// healthResult is -health's JSON summary.
type healthResult struct {
	Maps                  string  `json:"maps"`
	Backends              int     `json:"backends"`
	IntervalSeconds       float64 `json:"interval_seconds"`
	ProbesPerSec          float64 `json:"probes_per_sec"`
	CPUCoreFraction       float64 `json:"cpu_core_fraction"`
	CPUUserCoreFraction   float64 `json:"cpu_user_core_fraction"`
	CPUPerBackendPerSecUs float64 `json:"cpu_per_backend_per_sec_us"`
	CPUPerProbeUs         float64 `json:"cpu_per_probe_us"`
	ListenersCoreFraction float64 `json:"listeners_core_fraction"`
	// RunQueueWaitCoreFraction is how long the prober's threads waited
	// for a CPU while runnable, over the window: with a busy machine,
	// what makes probes late.
	RunQueueWaitCoreFraction float64       `json:"run_queue_wait_core_fraction"`
	LoadAverage1m            float64       `json:"load_average_1m"`
	ProbesStarted            uint64        `json:"probes_started"`
	ProbesLate100ms          uint64        `json:"probes_late_100ms"`
	ProbesLateInterval       uint64        `json:"probes_late_interval"`
	ProbeDelayP99Seconds     float64       `json:"probe_delay_p99_seconds"` // a bucket's bound`
	ProbeDelays              []bucketShare `json:"probe_delays"`
	ProbeDurationP99Seconds  float64       `json:"probe_duration_p99_seconds"` // a bucket's bound
	TripToMapsP50Ms          float64       `json:"trip_to_maps_p50_ms,omitempty"`
	TripToMapsP99Ms          float64       `json:"trip_to_maps_p99_ms,omitempty"`
	TripToMapsMaxMs          float64       `json:"trip_to_maps_max_ms,omitempty"`
	TripToTablesP99Ms        float64       `json:"trip_to_tables_p99_ms,omitempty"`
	TripBoundMs              float64       `json:"trip_bound_ms"`
}

// healthBench is the pipeline with health checking, over listeners in
// child processes.
type healthBench struct {
	*bench
	reg *prometheus.Registry
}

const healthFailures = 3 // --health-consecutive-failures

// newHealthBench is newBench with metrics and health checking, its maps
// sized for ho.backends in services of ten.
func newHealthBench(o options) (*healthBench, error) {
	hb := &healthBench{}
	o.services, o.backends = o.health.backends/10, 10
	o.cells = []cell.Cell{metrics.Cell, health.Cell,
		cell.Invoke(func(reg *prometheus.Registry) { hb.reg = reg })}
	o.configure = func(h *hive.Hive) {
		hive.AddConfigOverride(h, func(c *health.Config) {
			c.Health = true
			c.HealthInterval = o.health.interval
			c.HealthConsecutiveFailures = healthFailures
			c.HealthNetworks = []string{"127.0.0.0/8"}
		})
	}
	b, err := newBench(o)
	hb.bench = b
	return hb, err
}

// declare writes services of ten backends each over addrs (as the api
// source: the bench's k8s reflector sweeps what it did not declare), 1000 services
// per transaction, and waits until they are in the maps.
func (b *healthBench) declare(addrs []string) error {
	const perService, perTxn = 10, 1000
	for start := 0; start < len(addrs); start += perService * perTxn {
		txn := b.w.WriteTxn()
		err := b.w.Batch(txn, func() error {
			for i := start; i < min(len(addrs), start+perService*perTxn); i += perService {
				s := i / perService
				name := lb.NewServiceName("bench", fmt.Sprintf("svc-%d", s))
				fe := lb.MustParseL3n4Addr(fmt.Sprintf("10.%d.%d.%d:80/TCP", 96+s>>16, (s>>8)&255, s&255))
				if err := b.w.UpsertService(txn, lb.ServiceParams{Name: name, Source: lb.SourceAPI,
					Frontends: []lb.FrontendParams{{Address: fe, Type: lb.SVCTypeClusterIP}}}); err != nil {
					return err
				}
				var bes []lb.BackendParams
				for _, a := range addrs[i:min(len(addrs), i+perService)] {
					bes = append(bes, lb.BackendParams{Address: lb.MustParseL3n4Addr(a + "/TCP"), Weight: lb.DefaultBackendWeight})
				}
				if err := b.w.SetBackends(txn, name, lb.SourceAPI, bes...); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			txn.Abort()
			return err
		}
		txn.Commit()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	return lbreconciler.WaitReconciled(ctx, b.rec, b.frontends.Revision(b.db.ReadTxn()))
}

// delays is a snapshot of the health checker's delay histogram: how late
// probes started.
type delays struct {
	count  uint64
	bounds []float64 // seconds
	cumul  []uint64
}

// snapshot gathers the registry once and returns the checker's delay
// and (TCP) duration histograms, and the midpoint of the gather.
func (b *healthBench) snapshot() (at time.Time, delay, duration delays) {
	start := time.Now()
	mfs, _ := b.reg.Gather()
	at = start.Add(time.Since(start) / 2)
	return at, histogram(mfs, "lbstate_health_probe_delay_seconds"), histogram(mfs, "lbstate_health_probe_duration_seconds")
}

// histogram is the named histogram's first series in mfs.
func histogram(mfs []*dto.MetricFamily, name string) delays {
	var d delays
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) == 0 {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		d.count = h.GetSampleCount()
		for _, bk := range h.GetBucket() {
			d.bounds = append(d.bounds, bk.GetUpperBound())
			d.cumul = append(d.cumul, bk.GetCumulativeCount())
		}
	}
	return d
}

// since returns the probes started since d0, those that started over
// late seconds late (late: one of the buckets' bounds), and the bound
// under which 99% of them started (-1: past the last bucket).
func (d delays) since(d0 delays, late float64) (started, over uint64, p99 float64) {
	started = d.count - d0.count
	p99 = -1
	for i, bound := range d.bounds {
		under := d.cumul[i] - d0.cumul[i]
		if bound == late {
			over = started - under
		}
		if p99 < 0 && float64(under) >= 0.99*float64(started) {
			p99 = bound
		}
	}
	return started, over, p99
}

func runHealth(o options, out io.Writer) error {
	ho := o.health
	if ho.backends < 10 || ho.interval <= 0 || ho.window <= 0 || ho.fail < 0 || ho.fail > ho.backends/10 {
		return errors.New("-health: -health-backends at least 10, -health-interval and -health-window above 0, -health-fail at most one per service (backends/10)")
	}
	raiseFileLimit()
	g, err := startListeners(ho.backends)
	if err != nil {
		return fmt.Errorf("starting the listeners: %w", err)
	}
	defer g.stop()
	b, err := newHealthBench(o)
	if err != nil {
		return err
	}
	defer b.stop()
	res := healthResult{Maps: b.maps.Kind, Backends: ho.backends, IntervalSeconds: ho.interval.Seconds(),
		TripBoundMs: float64((ho.interval*healthFailures + 50*time.Millisecond).Milliseconds())}
	fmt.Fprintf(out, "lbbench -health: %d backends (10 per service) on loopback, probed every %s, %s maps\n", ho.backends, ho.interval, b.maps.Kind)
	if err := b.declare(g.addrs); err != nil {
		return err
	}
	time.Sleep(2 * ho.interval) // warm-up: every backend probed, phases settled

	stopProfile, err := startCPUProfile(o.cpuProfile) // the measured window only
	if err != nil {
		return err
	}
	// Gathering the registry (a breaker-state series per backend) takes
	// seconds at 100,000 backends, and the histograms are read somewhere
	// within it: probes are counted between the gathers' midpoints, and
	// the CPU only between them (the gathers are the benchmark's work).
	g0, d0, p0 := b.snapshot()
	runtime.GC() // the gather's garbage: collected here, not in the window
	user0, sys0 := selfCPU()
	wait0 := runDelays()
	child0 := g.cpu()
	t0 := time.Now()
	time.Sleep(ho.window)
	elapsed := time.Since(t0)
	user1, sys1 := selfCPU()
	waited := runDelaySince(wait0, runDelays())
	child1 := g.cpu()
	g1, d1, p1 := b.snapshot()
	stopProfile()
	counted := g1.Sub(g0)

	cpu := (user1 - user0) + (sys1 - sys0)
	res.ProbesStarted, res.ProbesLate100ms, res.ProbeDelayP99Seconds = d1.since(d0, 0.1)
	_, res.ProbesLateInterval, _ = d1.since(d0, nearestBound(d1.bounds, ho.interval.Seconds()))
	res.ProbesPerSec = float64(res.ProbesStarted) / counted.Seconds()
	res.CPUCoreFraction = cpu.Seconds() / elapsed.Seconds()
	res.CPUUserCoreFraction = (user1 - user0).Seconds() / elapsed.Seconds()
	res.CPUPerBackendPerSecUs = float64(cpu.Microseconds()) / elapsed.Seconds() / float64(ho.backends)
	res.CPUPerProbeUs = res.CPUCoreFraction * 1e6 / res.ProbesPerSec
	res.ListenersCoreFraction = (child1 - child0).Seconds() / elapsed.Seconds()
	fmt.Fprintf(out, "probes: %.0f/s; of %d started, %d over 100 ms late, %d over an interval late; 99%% within %gs of their time\n",
		res.ProbesPerSec, res.ProbesStarted, res.ProbesLate100ms, res.ProbesLateInterval, res.ProbeDelayP99Seconds)
	lateness, shares := d1.distribution(d0)
	res.ProbeDelays = shares
	fmt.Fprintf(out, "how late probes started: %s\n", lateness)
	_, _, res.ProbeDurationP99Seconds = p1.since(p0, 0)
	fmt.Fprintf(out, "probes took: 99%% within %gs\n", res.ProbeDurationP99Seconds)
	fmt.Fprintf(out, "prober CPU: %.1f%% of one core (user %.1f%%, system %.1f%%, TCP handshakes included): %.1f µs per backend per second, %.1f µs per probe\n",
		100*res.CPUCoreFraction, 100*res.CPUUserCoreFraction, 100*(res.CPUCoreFraction-res.CPUUserCoreFraction), res.CPUPerBackendPerSecUs, res.CPUPerProbeUs)
	res.RunQueueWaitCoreFraction = waited.Seconds() / elapsed.Seconds()
	load, _ := os.ReadFile("/proc/loadavg")
	res.LoadAverage1m, _ = strconv.ParseFloat(strings.Fields(string(load) + " 0")[0], 64)
	fmt.Fprintf(out, "prober's threads runnable but waiting for a CPU: %.1f%% of the window (summed over threads); load average %.2f\n",
		100*res.RunQueueWaitCoreFraction, res.LoadAverage1m)
	fmt.Fprintf(out, "listeners' CPU (the backends, not counted above): %.1f%% of one core\n", 100*res.ListenersCoreFraction)

	if ho.fail > 0 {
		lat, verdicts, err := b.timeTrips(g, ho)
		if err != nil {
			return err
		}
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		res.TripToMapsP50Ms, res.TripToMapsP99Ms, res.TripToMapsMaxMs = ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100]), ms(lat[len(lat)-1])
		res.TripToTablesP99Ms = ms(verdicts[len(verdicts)*99/100])
		fmt.Fprintf(out, "backend stopped -> tripped in the maps, %d backends: p50 %.0f ms, p99 %.0f ms, max %.0f ms (bound: interval x %d + 50 ms = %.0f ms); in the tables: p99 %.0f ms\n",
			len(lat), res.TripToMapsP50Ms, res.TripToMapsP99Ms, res.TripToMapsMaxMs, healthFailures, res.TripBoundMs, res.TripToTablesP99Ms)
	}
	if o.json {
		js, _ := json.Marshal(res)
		fmt.Fprintln(out, string(js))
	}
	return nil
}

// timeTrips stops one backend in each of the first ho.fail services and
// times each from its listener closing to its frontend, reconciled,
// giving it no new flows; and, for the split, to its backend row saying
// unhealthy (the verdict in the tables).
func (b *healthBench) timeTrips(g *listenerGroup, ho healthOptions) (toMaps, toTables []time.Duration, err error) {
	type pending struct {
		fe      lb.L3n4Addr
		backend lb.L3n4Addr
		stopped time.Time
		verdict bool
	}
	var ps []*pending
	for s := range ho.fail {
		addr := g.addrs[s*10]
		stopped, err := g.close(addr)
		if err != nil {
			return nil, nil, err
		}
		ps = append(ps, &pending{
			fe:      lb.MustParseL3n4Addr(fmt.Sprintf("10.%d.%d.%d:80/TCP", 96+s>>16, (s>>8)&255, s&255)),
			backend: lb.MustParseL3n4Addr(addr + "/TCP"), stopped: stopped,
		})
	}
	deadline := time.After(ho.interval*healthFailures*3 + 10*time.Second)
	for len(ps) > 0 {
		txn := b.db.ReadTxn()
		_, feWatch := b.frontends.AllWatch(txn)
		_, beWatch := b.backends.AllWatch(txn)
		now := time.Now()
		ps = slices.DeleteFunc(ps, func(p *pending) bool {
			if be, _, found := b.backends.Get(txn, tables.BackendByAddress.Query(p.backend)); !p.verdict && found && be.Unhealthy {
				p.verdict = true
				toTables = append(toTables, now.Sub(p.stopped))
			}
			fe, _, found := b.frontends.Get(txn, tables.FrontendByAddress.Query(p.fe))
			if !found || fe.Status.Kind != reconciler.StatusKindDone {
				return false
			}
			for _, ref := range fe.Backends {
				if ref.Address == p.backend && ref.Weight == 0 {
					toMaps = append(toMaps, now.Sub(p.stopped))
					return true
				}
			}
			return false
		})
		if len(ps) == 0 {
			break
		}
		select {
		case <-feWatch:
		case <-beWatch:
		case <-deadline:
			return nil, nil, fmt.Errorf("%d stopped backends not tripped in the maps in time", len(ps))
		}
	}
	slices.Sort(toMaps)
	slices.Sort(toTables)
	return toMaps, toTables, nil
}

// distribution is the share of the probes since d0 in each bucket, as
// "≤1ms 97.1%, ≤5ms 2.0%, ...", leaving out empty buckets.
func (d delays) distribution(d0 delays) (string, []bucketShare) {
	started := d.count - d0.count
	if started == 0 {
		return "none", nil
	}
	var parts []string
	var shares []bucketShare
	below := uint64(0)
	for i, bound := range d.bounds {
		under := d.cumul[i] - d0.cumul[i]
		if n := under - below; n > 0 {
			shares = append(shares, bucketShare{bound, float64(n) / float64(started)})
			parts = append(parts, fmt.Sprintf("≤%s %.2f%%", seconds(bound), 100*float64(n)/float64(started)))
		}
		below = under
	}
	if n := started - below; n > 0 {
		shares = append(shares, bucketShare{-1, float64(n) / float64(started)})
		parts = append(parts, fmt.Sprintf(">%s %.2f%%", seconds(d.bounds[len(d.bounds)-1]), 100*float64(n)/float64(started)))
	}
	return strings.Join(parts, ", "), shares
}

// bucketShare is the share of samples in the bucket up to Le seconds
// (-1: past the last bound) and above the one before.
type bucketShare struct {
	Le    float64 `json:"le"`
	Share float64 `json:"share"`
}

func seconds(s float64) string { return time.Duration(s * float64(time.Second)).String() }

// nearestBound is the largest bucket bound at most x (the delay
// histogram's buckets go up to 10 s), so that "over an interval late"
// errs towards counting more.
func nearestBound(bounds []float64, x float64) float64 {
	best := bounds[0]
	for _, b := range bounds {
		if b <= x {
			best = b
		}
	}
	return best
}
