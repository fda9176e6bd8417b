package health

import (
	"slices"
	"sync"
	"time"
)

// fakeClock is a Clock that moves only when a test advances it. Calls
// due run in time order, outside the clock's lock, from Advance.
type fakeClock struct {
	mu    sync.Mutex
	added *sync.Cond // a call was added
	now   time.Time
	calls []*fakeCall
}

type fakeCall struct {
	at      time.Time
	f       func()
	stopped bool
}

func newFakeClock() *fakeClock {
	c := &fakeClock{now: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
	c.added = sync.NewCond(&c.mu)
	return c
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) At(t time.Time, f func()) func() bool {
	c.mu.Lock()
	if !t.After(c.now) {
		c.mu.Unlock()
		f()
		return func() bool { return false }
	}
	call := &fakeCall{at: t, f: f}
	c.calls = append(c.calls, call)
	c.added.Broadcast()
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !call.stopped && slices.Contains(c.calls, call)
		call.stopped = true
		return was
	}
}

// Advance moves the clock by d, running every call that falls due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeCall
	c.calls = slices.DeleteFunc(c.calls, func(call *fakeCall) bool {
		if call.stopped || call.at.After(c.now) {
			return call.stopped
		}
		due = append(due, call)
		return true
	})
	c.mu.Unlock()
	slices.SortStableFunc(due, func(a, b *fakeCall) int { return a.at.Compare(b.at) })
	for _, call := range due {
		call.f()
	}
}

// waitForCall waits until a call at t is waiting (a probe started at a
// known time has set its timeout), and reports whether one did within
// ten seconds: a guard, as such a call comes within microseconds.
func (c *fakeClock) waitForCall(t time.Time) bool {
	expired := false
	guard := time.AfterFunc(10*time.Second, func() {
		c.mu.Lock()
		expired = true
		c.added.Broadcast()
		c.mu.Unlock()
	})
	defer guard.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for !slices.ContainsFunc(c.calls, func(call *fakeCall) bool { return !call.stopped && call.at.Equal(t) }) {
		if expired {
			return false
		}
		c.added.Wait()
	}
	return true
}
