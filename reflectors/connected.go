package reflectors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// A source that follows a world it can lose (an API server, an etcd)
// says so: Disconnected when it stops hearing from it, Connected when it
// hears again. While it is disconnected it keeps serving what it last
// wrote; its health is degraded with the error and
// lbstate_source_connected{source} is 0. Each outage is logged twice,
// whatever the number of retries inside it: one WARN when it starts (with
// the error) and one INFO when it ends (with how long it lasted).

// connState is what a source last said about its connection, and what
// ExpectSyncWithin found.
type connState struct {
	err       error     // non-nil while disconnected
	since     time.Time // when the outage started
	lastErr   error     // the last error reported, kept after the outage
	lateAfter time.Duration
}

// errNothingFailed is the health's error when a source missed its sync
// deadline without reporting any failure (still listing, or applying).
var errNothingFailed = errors.New("nothing failed; the initial state is still being read")

// Connected reports that the source reaches its world: every watch it
// needs is established. After Disconnected it logs one INFO line with
// the outage's duration and makes the health OK again. Safe from any
// goroutine; repeated calls do nothing more.
func (s *Source) Connected() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.connectedGauge().Set(1)
	wasDown := s.conn.err != nil
	s.conn.err = nil
	if !wasDown {
		return
	}
	s.log.Info("Source reconnected", "outage", time.Since(s.conn.since).Round(time.Millisecond))
	s.reportHealthLocked()
}

// Disconnected reports that the source does not reach its world (err
// says why) and is retrying: the first call of an outage logs one WARN
// line; later calls, one per failed retry, only update the error the
// health shows. Safe from any goroutine.
func (s *Source) Disconnected(err error) {
	if err == nil {
		err = errors.New("disconnected")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.connectedGauge().Set(0)
	prev := s.conn.err
	s.conn.err, s.conn.lastErr = err, err
	if prev == nil {
		s.conn.since = time.Now()
		s.log.Warn("Source disconnected, retrying", "error", err)
	}
	if prev == nil || prev.Error() != err.Error() {
		s.reportHealthLocked()
	}
}

// ExpectSyncWithin makes the source's health degraded, with "not synced
// after d" and the last error it reported, if it has not synced d after
// the call (and ctx is not done by then); it logs that once. The source
// keeps trying: Synced makes the health OK. d <= 0 sets no deadline.
func (s *Source) ExpectSyncWithin(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.AfterFunc(d, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.synced.Load() || ctx.Err() != nil {
			return
		}
		s.conn.lateAfter = d
		s.log.Warn("Source not synced in time, still trying", "after", d, "error", s.lateError())
		s.reportHealthLocked()
	})
	context.AfterFunc(ctx, func() { t.Stop() })
}

// lateError is the error a source late to sync shows.
func (s *Source) lateError() error {
	switch {
	case s.conn.err != nil:
		return s.conn.err
	case s.conn.lastErr != nil:
		return s.conn.lastErr
	}
	return errNothingFailed
}

// reportHealthLocked tells the health what the source's state is: a
// missed sync deadline first (it says the most), then an outage, then
// synced or waiting.
func (s *Source) reportHealthLocked() {
	if s.health == nil {
		return
	}
	synced := s.synced.Load()
	switch {
	case !synced && s.conn.lateAfter > 0:
		s.health.Degraded(fmt.Sprintf("Not synced after %s", s.conn.lateAfter), s.lateError())
	case s.conn.err != nil && synced:
		s.health.Degraded("Disconnected, serving the last state", s.conn.err)
	case s.conn.err != nil:
		s.health.Degraded("Disconnected, waiting for the initial sync", s.conn.err)
	case synced:
		s.health.OK("Synced")
	default:
		s.health.OK("Waiting for the initial sync")
	}
}

// connectedGauge is the source's lbstate_source_connected series,
// created at the first report so that sources without a connection
// (a directory) have none.
func (s *Source) connectedGauge() prometheus.Gauge { return s.connected.WithLabelValues(s.name) }
