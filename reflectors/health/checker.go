// Package health is a source of verdicts about backends: with --health it
// probes every backend that a frontend on this node uses (TCP connect,
// HTTP(S) GET, as each Service's lbstate.io/health-check* annotations
// say); with --health-passive it takes the reference datapath's reports
// of real TCP connections (Passive); it feeds both, and what other parts
// report through Reporter, into one consecutive-failures breaker per
// backend, and records each breaker's verdict with
// Writer.SetBackendVerdict. A backend that is not probed comes back by
// the half-open rule: its backoff running out reopens it on probation,
// where one failure trips it again. A tripped backend takes no new
// flows while its services have healthy ones; it is never the reason a
// service has no backend at all (selection's quarantined tier).
//
// The traps: one prober per backend address, however many services
// share it (the first service by name that sets a probe kind decides
// how); time comes from a Clock, so tests advance a fake one; probes
// start spread over their interval and at most --health-max-concurrent
// run at once, of which one service holds only its share (fairshare.go);
// a backend no longer checked has its probe under way ended at once; a
// TCP probe is half-open (SYN, SYN-ACK, reset: tcp.go), so a backend's
// program never sees one.
package health

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
)

// checker is the health checker: the targets (checked backends), their
// breakers and schedule. It is also the passive Reporter.
type checker struct {
	cfg     parsed
	clock   Clock
	metrics *metricSet
	web     *httpProber
	// slack lets the loop start a probe this much before it is due, so
	// that one wake-up starts many: with thousands of probes a second a
	// wake-up per probe costs more than the probes.
	slack time.Duration

	mu      sync.Mutex
	cur     *runState // nil while not running
	pending map[lb.L3n4Addr]queuedVerdict

	// Tests' hooks: probed is called after each probe's result is
	// applied; iterated after each turn of the loop, with the revision of
	// the frontends table it has followed up to.
	probed   func(lb.L3n4Addr, error)
	iterated func(frontendsRev statedb.Revision)
}

// runState is what one run of the checker builds and drops.
type runState struct {
	ctx     context.Context
	src     *reflectors.Source
	targets map[lb.L3n4Addr]*target
	queue   dueQueue
	// epoch is the run's start: due times are offsets from it, which the
	// queue compares faster than times.
	epoch    time.Time
	inflight int
	// blocked is set while due probes wait for one under way to end.
	blocked bool
	rand    *rand.Rand
	usage   usage
	// owners counts the targets charged to each service; slots holds the
	// services with probes under way or parked (fairshare.go).
	owners  map[lb.ServiceName]int
	slots   map[lb.ServiceName]*serviceSlots
	parkedN int
	waiting []*serviceSlots // the slots with parked targets
	timerAt time.Duration   // the timer's; -1 if none
	stop    func() bool
	jobs    chan probeJob // to the workers
	workers sync.WaitGroup
	wake    chan struct{} // the loop: a probe ended, a timer fired
	write   chan struct{} // the verdict writer: verdicts pending
}

// newChecker returns a checker with cfg, on clock, counting in m.
func newChecker(cfg parsed, clock Clock, m *metricSet) *checker {
	return &checker{cfg: cfg, clock: clock, metrics: m, slack: 5 * time.Millisecond, web: newHTTPProber()}
}

// run checks until ctx is done: it follows the frontends and backends
// tables, probes, and writes verdicts. It is the source's body: a write
// of verdicts that failed ends it with the error (the job runs it again,
// and the new run probes every backend anew).
func (c *checker) run(ctx context.Context, s *reflectors.Source, db *statedb.DB) (err error) {
	w := s.Writer
	txn := w.WriteTxn()
	fes, err := w.Frontends().Changes(txn)
	if err != nil {
		txn.Abort()
		return err
	}
	bes, err := w.Backends().Changes(txn)
	if err != nil {
		txn.Abort()
		return err
	}
	txn.Commit()
	// Nothing health checking writes is needed before the first prune:
	// synced from the start.
	s.Synced()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &runState{
		ctx: ctx, src: s, targets: map[lb.L3n4Addr]*target{}, epoch: c.clock.Now(),
		rand:  rand.New(rand.NewPCG(uint64(c.clock.Now().UnixNano()), 0x6c627374)),
		usage: newUsage(), owners: map[lb.ServiceName]int{}, slots: map[lb.ServiceName]*serviceSlots{},
		wake: make(chan struct{}, 1), write: make(chan struct{}, 1), timerAt: -1,
	}
	r.jobs = make(chan probeJob, c.cfg.maxConcurrent)
	poller, err := newConnectPoller(c.cfg.maxConcurrent)
	if err != nil {
		return err
	}
	r.workers.Add(c.cfg.maxConcurrent)
	for i := range c.cfg.maxConcurrent {
		go c.worker(r, newTCPProber(poller, i))
	}
	// The poller outlives the run until its last probe under way has
	// ended (stopRun aborts them).
	defer func() {
		go func() {
			r.workers.Wait()
			poller.close()
		}()
	}()
	c.mu.Lock()
	c.cur, c.pending = r, map[lb.L3n4Addr]queuedVerdict{}
	c.mu.Unlock()
	defer c.stopRun(r)

	done := make(chan struct{})
	var writeErr error
	go func() {
		defer close(done)
		if writeErr = c.writeVerdicts(r, w); writeErr != nil {
			cancel()
		}
	}()
	defer func() {
		<-done
		if writeErr != nil {
			err = writeErr
		}
	}()

	for {
		rtxn := db.ReadTxn()
		feChanges, feWatch := fes.Next(rtxn)
		beChanges, beWatch := bes.Next(rtxn)
		c.mu.Lock()
		now := c.clock.Now()
		for change := range feChanges {
			c.frontendChanged(r, change.Object, change.Deleted, now)
		}
		for change := range beChanges {
			if !change.Deleted {
				c.backendChanged(r, change.Object)
			}
		}
		c.dispatch(r)
		c.mu.Unlock()
		if c.iterated != nil {
			c.iterated(w.Frontends().Revision(rtxn))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-feWatch:
		case <-beWatch:
		case <-r.wake:
		}
	}
}

// stopRun drops what the run built: its targets' series, its timer.
func (c *checker) stopRun(r *runState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.stop != nil {
		r.stop()
	}
	for _, t := range r.targets {
		c.metrics.forget(t.addr)
		if t.abort != nil {
			t.abort()
		}
	}
	c.metrics.backends.Reset()
	c.cur = nil
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (r *runState) offset(t time.Time) time.Duration { return t.Sub(r.epoch) }
func (r *runState) at(d time.Duration) time.Time     { return r.epoch.Add(d) }

// addrPort is where a check probes a backend.
func addrPort(addr lb.L3n4Addr, c *check) netip.AddrPort {
	port := addr.Port()
	if c.port != 0 {
		port = c.port
	}
	return netip.AddrPortFrom(addr.Addr(), port)
}
