package health

import (
	"math/rand/v2"
	"time"
)

// breakerState is where a backend's consecutive-failures breaker stands.
// Only open takes the backend out of rotation.
type breakerState uint8

const (
	// closed: healthy; threshold consecutive failures trip it.
	closed breakerState = iota
	// probation: healthy again after a success while open; one failure
	// trips it again, with a longer backoff, and threshold consecutive
	// successes close it.
	probation
	// open: tripped, unhealthy; probed on a backoff until a probe passes.
	open
)

func (s breakerState) String() string {
	return [...]string{"closed", "probation", "open"}[s]
}

// transition is a change of breaker state worth a log line and a count.
type transition uint8

const (
	noTransition transition = iota
	tripped                 // closed or probation -> open
	reopened                // open -> probation
	recovered               // probation -> closed
)

func (t transition) String() string {
	return [...]string{"none", "tripped", "reopened", "recovered"}[t]
}

// breakerConfig is what every breaker shares.
type breakerConfig struct {
	// threshold is both the consecutive failures that trip a closed
	// breaker and the consecutive successes that end probation.
	threshold  int
	backoffMin time.Duration
	backoffMax time.Duration
	// jitter takes up to this fraction off each backoff, so that backends
	// that tripped together are not probed together.
	jitter float64
}

// breaker is one backend's consecutive-failures breaker (failure
// accrual): plain state, changed by one call per observation. A failure
// while probation re-trips at once, and the backoff keeps growing across
// trips until probation is passed, so a flapping backend is probed ever
// less often instead of flapping with every probe.
type breaker struct {
	state breakerState
	// count is the consecutive failures (closed) or successes
	// (probation) so far.
	count int
	// level is the backoff's exponent: failures since the breaker last
	// closed, counted while open or on probation.
	level int
	// since is when the verdict last changed (zero: never).
	since time.Time
	// lastErr is the error behind the verdict: the one that tripped it,
	// or the latest while open. Kept after recovery.
	lastErr string
}

// healthy is the breaker's verdict.
func (b *breaker) healthy() bool { return b.state != open }

// failure records a failed probe or connection.
func (b *breaker) failure(now time.Time, err string, cfg *breakerConfig) transition {
	switch b.state {
	case closed:
		b.count++
		if b.count < cfg.threshold {
			return noTransition
		}
	case probation:
		b.level++
	case open:
		b.level++
		b.lastErr = err
		return noTransition
	}
	b.state, b.count, b.since, b.lastErr = open, 0, now, err
	return tripped
}

// success records a passed probe or connection. Only an active probe
// reopens an open breaker (active); a passive success does not, as the
// flows behind it were chosen before the backend tripped.
func (b *breaker) success(now time.Time, active bool, cfg *breakerConfig) transition {
	switch b.state {
	case closed:
		b.count = 0
	case open:
		if !active {
			return noTransition
		}
		b.state, b.count, b.since = probation, 0, now
		return reopened
	case probation:
		b.count++
		if b.count >= cfg.threshold {
			b.state, b.count, b.level = closed, 0, 0
			return recovered
		}
	}
	return noTransition
}

// expire reopens an open breaker on probation without a probe: for a
// backend that is not probed actively, whose breaker only passive
// reports trip, its backoff running out is the only way back.
func (b *breaker) expire(now time.Time) transition {
	if b.state != open {
		return noTransition
	}
	b.state, b.count, b.since = probation, 0, now
	return reopened
}

// backoff is how long an open breaker waits before its next probe:
// backoffMin doubled per level, at most backoffMax, less up to jitter of
// it (r in [0,1) draws how much).
func (cfg *breakerConfig) backoff(level int, r float64) time.Duration {
	d := cfg.backoffMin
	for range level {
		if d >= cfg.backoffMax/2 {
			d = cfg.backoffMax
			break
		}
		d *= 2
	}
	d = min(d, cfg.backoffMax)
	return d - time.Duration(float64(d)*cfg.jitter*r)
}

// jitterSource draws the jitter; tests seed it.
type jitterSource interface{ Float64() float64 }

var _ jitterSource = (*rand.Rand)(nil)
