package health

import "time"

// Clock is the checker's time source: when probes are due, how long a
// probe may take, how long a tripped backend waits. Tests pass a fake
// one that they advance by hand, so that no test sleeps to wait for a
// probe.
type Clock interface {
	Now() time.Time
	// At calls f once the clock reaches t: at once if it already has.
	// f must not block. stop cancels the call and reports whether it
	// did.
	At(t time.Time, f func()) (stop func() bool)
}

// RealClock is the wall clock.
type RealClock struct{}

func (RealClock) Now() time.Time { return time.Now() }

func (RealClock) At(t time.Time, f func()) func() bool {
	return time.AfterFunc(time.Until(t), f).Stop
}
