package health

import (
	"testing"
	"time"
)

// The breaker trips on exactly the threshold's consecutive failure, a
// success in between starts the count again, one probe's success
// reopens it on probation, a failure on probation trips it at once, and
// the threshold's successes on probation close it.
func TestBreakerTransitions(t *testing.T) {
	cfg := breakerConfig{threshold: 3, backoffMin: time.Second, backoffMax: time.Minute}
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	type step struct {
		ok      bool
		passive bool
		want    transition
		state   breakerState
	}
	fail := func(want transition, s breakerState) step { return step{ok: false, want: want, state: s} }
	pass := func(want transition, s breakerState) step { return step{ok: true, want: want, state: s} }
	passivePass := func(want transition, s breakerState) step {
		return step{ok: true, passive: true, want: want, state: s}
	}
	steps := []step{
		fail(noTransition, closed), fail(noTransition, closed),
		pass(noTransition, closed), // the count starts again
		fail(noTransition, closed), fail(noTransition, closed), fail(tripped, open),
		fail(noTransition, open),
		passivePass(noTransition, open), // flows chosen before the trip prove nothing
		pass(reopened, probation),
		fail(tripped, open), // one failure on probation
		pass(reopened, probation),
		pass(noTransition, probation), pass(noTransition, probation), pass(recovered, closed),
		fail(noTransition, closed), fail(noTransition, closed), fail(tripped, open),
	}
	var b breaker
	for i, s := range steps {
		now := t0.Add(time.Duration(i) * time.Second)
		var got transition
		if s.ok {
			got = b.success(now, !s.passive, &cfg)
		} else {
			got = b.failure(now, "connect: connection refused", &cfg)
		}
		if got != s.want || b.state != s.state {
			t.Fatalf("step %d (ok=%v passive=%v): %s, now %s; want %s, %s", i, s.ok, s.passive, got, b.state, s.want, s.state)
		}
		// since is when the verdict changed: passing probation changes
		// the state, not the verdict.
		if (got == tripped || got == reopened) && !b.since.Equal(now) {
			t.Errorf("step %d: since %s, want the transition's time %s", i, b.since, now)
		}
	}
}

// The backoff of a breaker that stays open grows with each failure (also
// across a failed probation), is capped at the maximum, and starts over
// once probation is passed.
func TestBreakerBackoffGrowsUntilProbationPassed(t *testing.T) {
	cfg := breakerConfig{threshold: 1, backoffMin: time.Second, backoffMax: 5 * time.Second}
	var b breaker
	now := time.Now()
	backoff := func() time.Duration { return cfg.backoff(b.level, 0) }
	b.failure(now, "x", &cfg) // trips
	var got []time.Duration
	got = append(got, backoff())
	b.failure(now, "x", &cfg)
	got = append(got, backoff())
	b.success(now, true, &cfg) // probation
	b.failure(now, "x", &cfg)  // trips again, longer
	got = append(got, backoff())
	b.failure(now, "x", &cfg)
	got = append(got, backoff())
	b.success(now, true, &cfg)
	b.success(now, true, &cfg) // probation passed (threshold 1)
	b.failure(now, "x", &cfg)
	got = append(got, backoff())
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, time.Second}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("backoffs %v, want %v", got, want)
		}
	}
}

// Jitter only shortens a backoff, by at most its fraction, and a large
// level neither overflows nor passes the maximum.
func TestBackoffJitterBounds(t *testing.T) {
	cfg := breakerConfig{backoffMin: time.Second, backoffMax: time.Minute, jitter: 0.2}
	for _, r := range []float64{0, 0.5, 0.999} {
		if d := cfg.backoff(0, r); d > time.Second || d < 800*time.Millisecond {
			t.Errorf("r=%g: %s outside [0.8s, 1s]", r, d)
		}
	}
	if d := cfg.backoff(1000, 0); d != time.Minute {
		t.Errorf("level 1000: %s, want the maximum", d)
	}
	if a, b := cfg.backoff(3, 0.1), cfg.backoff(3, 0.9); a == b {
		t.Errorf("different draws give the same backoff %s", a)
	}
}
