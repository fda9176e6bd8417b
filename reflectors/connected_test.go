package reflectors_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/lbstate/lbstate/internal/syncbuf"
	"github.com/lbstate/lbstate/reflectors"
)

// waitFor polls cond until it holds, failing after 5s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 5s", what)
		}
	}
}

// An outage, however many retries fail inside it, is one WARN line with
// the error and one INFO line with its duration; meanwhile the source's
// connected gauge is 0 and its health degraded with the latest error,
// and after it the gauge is 1 and the health OK as before.
func TestOutageIsOneWarningOneInfoDegradedHealthAndGauge(t *testing.T) {
	log := &syncbuf.Buffer{}
	down, back := make(chan struct{}), make(chan struct{})
	_, _, reg, health := startLoggedSource(t, func(ctx context.Context, s *reflectors.Source) error {
		s.Connected()
		s.Synced()
		<-down
		for i := range 50 {
			s.Disconnected(fmt.Errorf("dial tcp 127.0.0.1:6443: connection refused (retry %d)", i))
		}
		<-back
		s.Connected()
		s.Connected()
		<-ctx.Done()
		return nil
	}, slog.NewTextHandler(log, nil))
	waitFor(t, "synced and connected", func() bool { return gauge(reg, "lbstate_source_connected") == 1 && health.Last() == "OK Synced" })
	close(down)
	waitFor(t, "degraded with the last retry's error", func() bool {
		return health.Last() == "Degraded Disconnected, serving the last state: dial tcp 127.0.0.1:6443: connection refused (retry 49)"
	})
	if got := gauge(reg, "lbstate_source_connected"); got != 0 {
		t.Fatalf("lbstate_source_connected = %v while disconnected, want 0", got)
	}
	close(back)
	waitFor(t, "OK again", func() bool { return health.Last() == "OK Synced" })
	if got := gauge(reg, "lbstate_source_connected"); got != 1 {
		t.Fatalf("lbstate_source_connected = %v after reconnecting, want 1", got)
	}
	out := log.String()
	if n := strings.Count(out, "level=WARN"); n != 1 || !strings.Contains(out, `msg="Source disconnected, retrying" source=test error="dial tcp 127.0.0.1:6443: connection refused (retry 0)"`) {
		t.Errorf("%d WARN lines, want one with the first error:\n%s", n, out)
	}
	if n := strings.Count(out, `msg="Source reconnected"`); n != 1 || !strings.Contains(out, "outage=") {
		t.Errorf("%d reconnection lines, want one with the outage's duration:\n%s", n, out)
	}
}

// A source that has not synced by its deadline is degraded with the
// deadline and its last error (once logged), keeps trying, and is OK
// once it syncs; a source that never reports a connection has no
// connected series.
func TestSourceNotSyncedByDeadlineIsDegradedUntilSynced(t *testing.T) {
	log := &syncbuf.Buffer{}
	release := make(chan struct{})
	_, _, reg, health := startLoggedSource(t, func(ctx context.Context, s *reflectors.Source) error {
		s.ExpectSyncWithin(ctx, 20*time.Millisecond)
		<-release
		s.Synced()
		<-ctx.Done()
		return nil
	}, slog.NewTextHandler(log, nil))
	waitFor(t, "degraded", func() bool {
		return health.Last() == "Degraded Not synced after 20ms: nothing failed; the initial state is still being read"
	})
	if got := gauge(reg, "lbstate_source_connected"); got != -1 {
		t.Errorf("lbstate_source_connected = %v for a source that never reported a connection, want no series", got)
	}
	close(release)
	waitFor(t, "OK once synced", func() bool { return health.Last() == "OK Synced" })
	if n := strings.Count(log.String(), "Source not synced in time"); n != 1 {
		t.Errorf("%d lines about the missed deadline, want 1:\n%s", n, log)
	}
}

// Late and disconnected, a source shows the connection's error under its
// deadline; back and synced, it is OK.
func TestLateDisconnectedSourceShowsTheConnectionError(t *testing.T) {
	release := make(chan struct{})
	_, _, _, health := startSource(t, func(ctx context.Context, s *reflectors.Source) error {
		s.Disconnected(errors.New("connection refused"))
		s.ExpectSyncWithin(ctx, 10*time.Millisecond)
		<-release
		s.Connected()
		s.Synced()
		<-ctx.Done()
		return nil
	})
	waitFor(t, "degraded", func() bool { return health.Last() == "Degraded Not synced after 10ms: connection refused" })
	close(release)
	waitFor(t, "OK once synced", func() bool { return health.Last() == "OK Synced" })
}
