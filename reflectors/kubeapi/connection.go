package kubeapi

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reporter is told whether the API server is reached
// (*reflectors.Source is one). Its methods are called with the
// Connection's lock held, one at a time, in order.
type Reporter interface {
	// Connected: every list and watch made last succeeded. Called at
	// the first time that holds, and when an outage ends.
	Connected()
	// Disconnected: a list or watch failed. Called at every failure
	// (once per retry), each with the latest error of the call that has
	// been failing the longest.
	Disconnected(err error)
}

const (
	retryMin = 250 * time.Millisecond
	retryMax = time.Second
)

// Connection follows the lists and watches of one source's informers:
// the source is connected while the last call of each succeeded.
type Connection struct {
	report             Reporter
	retryMin, retryMax time.Duration

	mu        sync.Mutex
	members   map[any]*member // by *ListWatch, or a Call's name
	seq       uint64
	connected bool    // what was last reported
	shown     *member // the member whose error was last reported
}

// member is one ListWatch's (or one named Call's) last outcome.
type member struct {
	ok    bool   // its last call succeeded
	err   error  // its last call failed with err (ok false)
	since uint64 // when (c.seq) it started failing
}

// NewConnection returns a Connection that reports to r.
func NewConnection(r Reporter) *Connection {
	return &Connection{report: r, retryMin: retryMin, retryMax: retryMax, members: map[any]*member{}}
}

// Call makes one call that is not an informer's (a discovery probe, say)
// under the same rules as a ListWatch's: while the API server does not
// answer, it reports the source disconnected and tries again, until the
// call succeeds, fails otherwise (returned) or ctx is done. name keys
// its outcome: a Call that failed counts until a Call of the same name
// succeeds.
func (c *Connection) Call(ctx context.Context, name string, call func(ctx context.Context) error) error {
	return c.call(ctx, name, call)
}

// join adds a member that has made no call yet: the source is not
// reported connected before its first call succeeds.
func (c *Connection) join(key any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.members[key]; !ok {
		c.members[key] = &member{}
	}
}

// Forget stops counting lw (its informer is stopped for good): its
// failures no longer keep the source disconnected once another call
// settles. Forgetting reports no reconnection itself: informers are
// forgotten as the source stops watching, which is no end of an outage.
func (c *Connection) Forget(lw *ListWatch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.members, lw)
}

func (c *Connection) call(ctx context.Context, key any, call func(ctx context.Context) error) error {
	delay := c.retryMin
	for {
		err := call(ctx)
		switch {
		case err == nil:
			c.settle(key, nil)
			return nil
		case ctx.Err() != nil:
			return err // stopping: says nothing about the API server
		case Unavailable(err):
			c.settle(key, err)
		default:
			if Refused(err) {
				c.settle(key, err)
			}
			return err // the reflector's own handling (and backoff) applies
		}
		t := time.NewTimer(delay + rand.N(delay/4+1)) // a little jitter: nodes do not retry in step
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		delay = min(2*delay, c.retryMax)
	}
}

// settle records a member's call (err nil: it succeeded) and reports.
func (c *Connection) settle(key any, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.members[key]
	if m == nil {
		m = &member{}
		c.members[key] = m
	}
	c.seq++
	if err != nil && m.err == nil {
		m.since = c.seq
	}
	m.ok, m.err = err == nil, err
	c.updateLocked(err != nil)
}

// updateLocked reports Disconnected with the latest error of the member
// failing the longest, if any (one member's: the error shown changes
// when what fails changes, not at every other member's retry), when a
// call just failed or the member shown changed (another member's success
// while the same one fails changes nothing a reader sees); else
// Connected once every member has succeeded.
func (c *Connection) updateLocked(failed bool) {
	var failing *member
	pending := false
	for _, m := range c.members {
		switch {
		case m.err != nil:
			if failing == nil || m.since < failing.since {
				failing = m
			}
		case !m.ok:
			pending = true
		}
	}
	switch {
	case failing != nil:
		c.connected = false
		if failed || failing != c.shown {
			c.report.Disconnected(failing.err)
		}
		c.shown = failing
	case !pending && !c.connected:
		c.connected, c.shown = true, nil
		c.report.Connected()
	}
}

// Unavailable reports whether err says that the API server did not
// answer (a transport error: refused, reset, timed out, closed, a TLS
// failure) or answered that it cannot serve now (502, 503, as an API
// server starting or a proxy in front of it does). Such a call is worth
// trying again soon.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code == http.StatusBadGateway || code == http.StatusServiceUnavailable
	}
	var (
		urlErr *url.Error
		netErr net.Error
	)
	return errors.As(err, &urlErr) || errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// Refused reports whether err is an answer that leaves the source unable
// to watch, though the API server is up: its credentials rejected (401),
// or a server error (5xx) other than those Unavailable reports and a
// lagging API server's "too large resource version" (which the
// reflector answers by listing again). The source counts as
// disconnected until a call succeeds, but the reflector retries with its
// own backoff: trying faster would not help. A 403 is not one: it
// forbids one resource, not the connection (CRDs turns a forbidden kind
// off, with one log line).
func Refused(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	s := status.Status()
	switch {
	case s.Code == http.StatusUnauthorized:
		return true
	case s.Code < 500, Unavailable(err):
		return false
	}
	return !apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) &&
		!strings.Contains(s.Message, "Too large resource version")
}
