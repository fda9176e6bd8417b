package health

import (
	"context"
	"errors"
	"time"
)

// schedule places a target: a tripped one after its backoff; one that
// is new or whose check changed (fresh) a phase into its interval;
// others one interval after their last due time, which keeps their phase
// (skipping the intervals a slow probe overran). A target that is not
// probed waits only while tripped, for its backoff to run out.
func (c *checker) schedule(r *runState, t *target, now time.Time, fresh bool) {
	if t.probing || t.removed || t.parked {
		return // a probe's end schedules it; a parked one is due already
	}
	off := r.offset(now)
	switch {
	case t.breaker.state == open:
		t.due = off + c.cfg.breaker.backoff(t.breaker.level, r.rand.Float64())
	case t.check.kind == probeNone:
		r.queue.remove(t)
		return
	case fresh:
		t.due = off + phase(t.addr, t.check.interval)
	default:
		next := t.due + t.check.interval
		if next <= off {
			next += (off-next)/t.check.interval*t.check.interval + t.check.interval
		}
		t.due = next
	}
	c.put(r, t)
}

// put queues t, and sets the timer if t is now the first due.
func (c *checker) put(r *runState, t *target) {
	r.queue.put(t)
	if t.index == 0 {
		c.armTimer(r)
	}
}

// dispatch starts the probes that are due (up to the concurrency bound,
// and each service's share of it; a probe's end wakes the loop for the
// rest), expires the backoff of
// tripped targets that are not probed, and sets the timer for the next.
func (c *checker) dispatch(r *runState) {
	now := c.clock.Now()
	off := r.offset(now)
	horizon := off + c.slack
	r.timerAt, r.blocked = -1, false // the loop was woken: perhaps by the timer
	share := r.share(c.cfg.maxConcurrent)
	r.unparkWithin(share, c.cfg.maxConcurrent-r.inflight)
	for r.queue.Len() > 0 && r.queue[0].due <= horizon {
		t := r.queue.first()
		if t.check.kind == probeNone {
			r.queue.pop()
			prev := t.breaker
			c.observed(r, t, prev, t.breaker.expire(now), now)
			c.schedule(r, t, now, false)
			continue
		}
		if r.inflight >= c.cfg.maxConcurrent {
			r.blocked = true
			return
		}
		r.queue.pop()
		s := r.slotsOf(t)
		if !s.mayStart(share, r.inflight, c.cfg.maxConcurrent) {
			r.park(t, s)
			continue
		}
		c.metrics.delay.Observe(max(0, off-t.due).Seconds())
		t.probing, t.slot = true, s
		s.inflight++
		r.inflight++
		r.jobs <- probeJob{t, t.check, now} // never blocks: inflight bounds the jobs
	}
	c.armTimer(r)
}

// armTimer wakes the loop when the first queued target is due.
func (c *checker) armTimer(r *runState) {
	if r.queue.Len() == 0 {
		return
	}
	at := r.queue[0].due
	if at == r.timerAt {
		return
	}
	if r.stop != nil {
		r.stop()
	}
	r.timerAt = at
	wake := r.wake
	r.stop = c.clock.At(r.at(at), func() { signal(wake) })
}

var (
	errProbeTimeout = errors.New("probe timeout")
	errProbeAborted = errors.New("probe aborted: the backend is no longer checked")
)

// setAbort records how to end t's probe under way, or ends it at once if
// t, or the run, is gone already.
func (c *checker) setAbort(r *runState, t *target, abort func()) {
	c.mu.Lock()
	gone := t.removed || c.cur != r
	if !gone {
		t.abort = abort
	}
	c.mu.Unlock()
	if gone {
		abort()
	}
}

// probeJob is one probe for a worker.
type probeJob struct {
	t     *target
	chk   check
	start time.Time
}

// worker runs probes until the run ends. Workers live as long as the
// run, so that their stacks, once grown, stay: a goroutine per probe
// spent more time growing its stack than probing.
func (c *checker) worker(r *runState, tcp *tcpProber) {
	defer r.workers.Done()
	defer tcp.close()
	for {
		select {
		case <-r.ctx.Done():
			return
		case j := <-r.jobs:
			c.probe(r, tcp, j.t, j.chk, j.start)
		}
	}
}

// probe runs one probe, cut by its timeout on the checker's clock, and
// applies its result. Probes under way when the run ends run to their
// timeout at most, and their results are dropped.
func (c *checker) probe(r *runState, tcp *tcpProber, t *target, chk check, start time.Time) {
	deadline := start.Add(chk.timeout)
	to := addrPort(t.addr, &chk)
	began := time.Now() // the wall clock: start is the checker's, which tests fake
	var err error
	if chk.kind == probeTCP {
		err = tcp.probe(to, chk.timeout, func(abort func()) func() bool {
			c.setAbort(r, t, abort)
			return c.clock.At(deadline, abort)
		})
	} else {
		ctx, cancel := context.WithCancelCause(context.Background())
		c.setAbort(r, t, func() { cancel(errProbeAborted) })
		stop := c.clock.At(deadline, func() { cancel(errProbeTimeout) })
		err = c.web.probe(ctx, to, &chk)
		stop()
		if err != nil && errors.Is(context.Cause(ctx), errProbeTimeout) {
			err = timeoutError{chk.timeout}
		}
		cancel(nil)
	}
	c.metrics.duration[chk.kind].Observe(time.Since(began).Seconds())
	c.complete(r, t, chk, err)
}

// complete applies a probe's result to its target's breaker.
func (c *checker) complete(r *runState, t *target, chk check, err error) {
	c.mu.Lock()
	if c.cur != r {
		c.mu.Unlock()
		return
	}
	r.inflight--
	t.probing, t.abort = false, nil
	if s := t.slot; s != nil {
		t.slot = nil
		s.inflight--
		if r.parkedN > 0 {
			signal(r.wake) // dispatch requeues what may start now
		}
		r.release(s)
	}
	if r.blocked {
		signal(r.wake)
	}
	if !t.removed {
		now := c.clock.Now()
		result := resultSuccess
		if err != nil {
			// Only here: errors.As's target escapes, an allocation that
			// passed probes, nearly all, need not make.
			result = resultFailure
			if timeout := (timeoutError{}); errors.As(err, &timeout) {
				result = resultTimeout
			}
		}
		c.metrics.probed(chk.kind, result)
		prev := t.breaker
		bc := c.breakerOf(t)
		var tr transition
		if err != nil {
			msg := describe(err)
			tr = t.breaker.failure(now, msg, &bc)
			t.failedBy, t.lastFailure = chk.kind.String()+" probe", err
			t.log.Debug("Probe failed", "error", msg)
		} else {
			tr = t.breaker.success(now, true, &bc)
		}
		c.schedule(r, t, now, false)
		c.observed(r, t, prev, tr, now)
	}
	probed := c.probed
	c.mu.Unlock()
	if probed != nil {
		probed(t.addr, err)
	}
}
