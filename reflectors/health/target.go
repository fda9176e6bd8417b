package health

import (
	"hash/fnv"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbstate/lbstate/lb"
)

// target is one checked backend address: its check, breaker and place in
// the schedule.
type target struct {
	addr     lb.L3n4Addr
	services []lb.ServiceName
	log      *slog.Logger // carries the services and the backend
	check    check
	breaker  breaker
	// verdict is the last verdict handed to the writer.
	verdict lb.HealthVerdict
	// failedBy is what saw the last failure (a probe, or a passive
	// report's source) and lastFailure the error: for the trip's log line.
	failedBy    string
	lastFailure error

	due     time.Duration // since the run's epoch
	index   int           // in the queue; -1 when not queued
	probing bool
	removed bool
	state   prometheus.Gauge

	// owner is the service its probes are charged to; slot, that
	// service's slots while it is parked or probed (fairshare.go).
	owner  lb.ServiceName
	parked bool
	slot   *serviceSlots
	// abort ends the probe under way, if any.
	abort func()
}

// refreshTarget starts, changes or stops checking a backend after the
// frontends that list it changed.
func (c *checker) refreshTarget(r *runState, b lb.L3n4Addr, now time.Time) {
	if len(r.usage.users[b]) == 0 {
		delete(r.usage.users, b)
		c.removeTarget(r, b)
		return
	}
	if !c.inNetworks(b) {
		return
	}
	names, chk, owner := r.resolve(b, c.cfg.defaults)
	if !c.cfg.active {
		chk.kind = probeNone // passive accrual only (--health-passive)
	}
	t := r.targets[b]
	if t == nil {
		t = &target{addr: b, index: -1, state: c.metrics.state.WithLabelValues(b.String()), verdict: lb.HealthVerdict{Healthy: true}}
		r.targets[b] = t
		t.state.Set(float64(closed))
		c.metrics.backends.WithLabelValues(chk.kind.String()).Inc()
		t.services, t.log = names, scopedLog(r, names, b)
		t.check = chk
		r.setOwner(t, owner)
		c.schedule(r, t, now, true)
		return
	}
	r.setOwner(t, owner)
	if !slices.Equal(t.services, names) {
		t.services, t.log = names, scopedLog(r, names, b)
	}
	if t.check != chk {
		c.metrics.backends.WithLabelValues(t.check.kind.String()).Dec()
		c.metrics.backends.WithLabelValues(chk.kind.String()).Inc()
		old := t.check
		t.check = chk
		if old.kind != chk.kind || old.interval != chk.interval {
			c.schedule(r, t, now, true)
		}
	}
}

// removeTarget stops checking a backend, and ends a probe of it under
// way. A verdict it recorded is cleared: nobody would ever lift it.
func (c *checker) removeTarget(r *runState, b lb.L3n4Addr) {
	t := r.targets[b]
	if t == nil {
		return
	}
	delete(r.targets, b)
	t.removed = true
	r.queue.remove(t)
	r.setOwner(t, lb.ServiceName{})
	if t.parked {
		r.unpark(t, false)
	}
	if t.abort != nil {
		t.abort() // its slot frees when the probe returns, at once
	}
	c.metrics.forget(b)
	c.metrics.backends.WithLabelValues(t.check.kind.String()).Dec()
	if !t.breaker.healthy() {
		t.log.Info("Backend no longer checked: its breaker's verdict is lifted", "state", t.breaker.state)
	}
	if cleared := (lb.HealthVerdict{Healthy: true}); !t.verdict.Equal(cleared) {
		c.queueVerdict(r, b, cleared, "no longer checked")
	}
}

func (c *checker) inNetworks(b lb.L3n4Addr) bool {
	if len(c.cfg.networks) == 0 {
		return true
	}
	for _, p := range c.cfg.networks {
		if p.Contains(b.Addr()) {
			return true
		}
	}
	return false
}

func scopedLog(r *runState, names []lb.ServiceName, b lb.L3n4Addr) *slog.Logger {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = n.String()
	}
	return r.src.Log().With("service", strings.Join(s, ","), "backend", b.String())
}

// phase spreads a backend's probes over the interval, the same for the
// same address, so that backends that appear together are not probed
// together.
func phase(b lb.L3n4Addr, interval time.Duration) time.Duration {
	h := fnv.New64a()
	h.Write(b.Key())
	return time.Duration(h.Sum64() % uint64(interval))
}
