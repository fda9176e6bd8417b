package health

import (
	"testing"
	"time"

	"github.com/lbstate/lbstate/lb"
)

// passiveConfig is testConfig with passive accrual and no probes.
func passiveConfig() Config {
	c := testConfig()
	c.Health, c.HealthPassive = false, true
	return c
}

// With --health-passive alone nothing is probed; the datapath's reports
// trip a TCP backend's breaker (logged with their cause and source), its
// backoff running out reopens it on probation (the half-open rule), a
// failure there trips it again at once with a doubled backoff, and
// threshold successes after the next reopening close it.
func TestPassiveOnlyTripsWithoutProbesAndReopensByTheHalfOpenRule(t *testing.T) {
	h := newHarness(t, passiveConfig())
	p := &Passive{c: h.c}
	be := refusingAddr(t) // a probe would fail: none runs
	h.declare("web", vip, nil, be)
	h.clock.Advance(10 * time.Second)
	select {
	case r := <-h.probes:
		t.Fatalf("probed %s without --health", r.addr)
	default:
	}
	p.Report(SourceSocket, be, nil)
	for range 3 {
		p.Report(SourceTC, be, ErrConnectRefused)
	}
	h.verdict(be, false)
	h.clock.Advance(time.Second) // the backoff
	h.verdict(be, true)
	p.Report(SourceSocket, be, ErrConnectTimeout) // on probation: trips again
	h.verdict(be, false)
	h.clock.Advance(2 * time.Second) // doubled
	h.verdict(be, true)
	for range 3 {
		p.Report(SourceSocket, be, nil)
	}
	want := `level=INFO msg="Consecutive failure-accrual breaker tripped" source=health service=default/web backend=BE failures=3 last_error="connection refused" cause=refused seen_by=tc probation=false next_probe_in=1s
level=INFO msg="Consecutive failure-accrual breaker reopened" source=health service=default/web backend=BE down_for=1s probation_successes=3
level=INFO msg="Consecutive failure-accrual breaker tripped" source=health service=default/web backend=BE failures=1 last_error="connect timeout" cause=timeout seen_by=socket probation=true next_probe_in=2s
level=INFO msg="Consecutive failure-accrual breaker reopened" source=health service=default/web backend=BE down_for=2s probation_successes=3
level=INFO msg="Consecutive failure-accrual breaker closed: probation passed" source=health service=default/web backend=BE successes=3`
	if got := h.lines("breaker", be.String(), "BE"); got != want {
		t.Errorf("log:\n%s\nwant:\n%s", got, want)
	}
	for cause, want := range map[string]float64{causeRefused: 3, causeTimeout: 1} {
		if got := h.metric(h.c.metrics.failures.WithLabelValues(be.String(), cause)); got != want {
			t.Errorf("failures of %s by %s: %v, want %v", be, cause, got, want)
		}
	}
	if got := h.metric(h.c.metrics.passiveN[0]); got != 4 {
		t.Errorf("passive successes: %v, want 4", got)
	}
}

// A service opts out of passive accrual, or sets its own threshold, with
// annotations; a bad value is rejected and the default applies. UDP
// backends are not judged by the datapath's reports.
func TestServiceAnnotationsOptOutOfPassiveAccrualOrTuneItsThreshold(t *testing.T) {
	h := newHarness(t, passiveConfig())
	p := &Passive{c: h.c}
	optedOut, strict, bad := refusingAddr(t), refusingAddr(t), refusingAddr(t)
	udp := lb.MustParseL3n4Addr("127.0.0.1:53/UDP")
	h.declare("quiet", "10.96.0.11:80/TCP", map[string]string{AnnotationPassive: "false"}, optedOut)
	h.declare("strict", "10.96.0.12:80/TCP", map[string]string{AnnotationConsecutiveFailures: "1"}, strict)
	h.declare("typo", "10.96.0.13:80/TCP", map[string]string{AnnotationConsecutiveFailures: "many"}, bad)
	h.declare("dns", "10.96.0.10:53/UDP", nil, udp)
	for range 5 {
		p.Report(SourceTC, optedOut, ErrConnectRefused)
		p.Report(SourceTC, udp, ErrConnectRefused)
	}
	p.Report(SourceTC, strict, ErrConnectRefused)
	h.verdict(strict, false)
	for range 2 {
		p.Report(SourceTC, bad, ErrConnectRefused)
	}
	h.verdict(bad, true)
	p.Report(SourceTC, bad, ErrConnectRefused) // the node's 3
	h.verdict(bad, false)
	h.verdict(optedOut, true)
	h.verdict(udp, true)
	if got := h.metric(h.c.metrics.passiveN[2]); got != 10 {
		t.Errorf("ignored reports: %v, want 10", got)
	}
	if got := h.lines("annotation"); !containsAll(got, "service default/typo", AnnotationConsecutiveFailures, "many", "want a count, 1-100") {
		t.Errorf("the bad annotation's log line: %q", got)
	}
}

// A backend no longer checked loses its failure series.
func TestPassiveFailureSeriesGoWithTheBackend(t *testing.T) {
	h := newHarness(t, passiveConfig())
	p := &Passive{c: h.c}
	be := refusingAddr(t)
	h.declare("web", vip, nil, be)
	p.Report(SourceSocket, be, ErrConnectRefused)
	if n := testutilCount(h, "lbstate_health_passive_failures_total"); n != 1 {
		t.Fatalf("%d failure series, want 1", n)
	}
	h.declare("web", vip, nil)
	if n := testutilCount(h, "lbstate_health_passive_failures_total"); n != 0 {
		t.Errorf("%d failure series after the backend left, want 0", n)
	}
}
