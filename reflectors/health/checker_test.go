package health

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lbstate/lbstate/lb"
)

const vip = "10.96.0.1:80/TCP"

// A backend that refuses connections trips on exactly the third failed
// probe, is probed again after the backoff, and once it accepts
// connections is reopened, then closes after three probes on probation;
// each transition is one INFO line with the service and the backend.
func TestRefusingBackendTripsAndReopens(t *testing.T) {
	h := newHarness(t, testConfig())
	be := refusingAddr(t)
	h.declare("web", vip, nil, be)

	for i := range 2 {
		if r := h.step(time.Second); r.err == nil || describe(r.err) != "connect: connection refused" {
			t.Fatalf("probe %d: %v", i+1, r.err)
		}
	}
	if lines := h.lines("breaker"); lines != "" {
		t.Fatalf("tripped before the third failure:\n%s", lines)
	}
	h.step(time.Second)
	row := h.verdict(be, false)
	if row.HealthError() != "connect: connection refused" || !row.HealthSince().Equal(h.clock.Now()) {
		t.Errorf("row after the trip: since %s, error %q", row.HealthSince(), row.HealthError())
	}

	ln, err := net.Listen("tcp", be.AddrPort().String()) // the backend comes back
	if err != nil {
		t.Skipf("port %s taken meanwhile: %v", be, err)
	}
	acceptAndClose(t, ln)
	if r := h.step(time.Second); r.err != nil { // the backoff's probe
		t.Fatal(r.err)
	}
	h.verdict(be, true)
	for range 3 {
		if r := h.step(time.Second); r.err != nil {
			t.Fatal(r.err)
		}
	}
	want := `level=INFO msg="Consecutive failure-accrual breaker tripped" source=health service=default/web backend=BE failures=3 last_error="connect: connection refused" probation=false next_probe_in=1s
level=INFO msg="Consecutive failure-accrual breaker reopened" source=health service=default/web backend=BE down_for=1s probation_successes=3
level=INFO msg="Consecutive failure-accrual breaker closed: probation passed" source=health service=default/web backend=BE successes=3`
	if got := h.lines("breaker", be.String(), "BE"); got != want {
		t.Errorf("log:\n%s\nwant:\n%s", got, want)
	}
	if strings.Contains(h.log.String(), "Probe") {
		t.Errorf("a probe was logged at INFO:\n%s", h.log.String())
	}
}

// A probe of a backend that never answers is cut by its timeout, on the
// checker's clock, and counts as a failure.
func TestHangingProbeIsCutByItsTimeout(t *testing.T) {
	h := newHarness(t, testConfig())
	be := hangingAddr(t)
	h.declare("web", vip, nil, be)

	for i := range 3 {
		start := h.advanceToDue(be)
		if !h.clock.waitForCall(start.Add(500 * time.Millisecond)) { // the probe is under way
			t.Fatal("no probe started")
		}
		h.clock.Advance(500 * time.Millisecond)
		if r := h.nextProbe(); r.err == nil || r.err.Error() != "timeout after 500ms" {
			t.Fatalf("probe %d: %v", i+1, r.err)
		}
	}
	if row := h.verdict(be, false); row.HealthError() != "timeout after 500ms" {
		t.Errorf("last error %q", row.HealthError())
	}
	if got := h.metric(h.c.metrics.probes.WithLabelValues("tcp", resultTimeout)); got != 3 {
		t.Errorf("%v probes counted as timeouts, want 3", got)
	}
}

// An HTTP backend answering 500 fails its probes; the error says which
// status it gave and which it should have.
func TestHTTPBackendAnswering500Trips(t *testing.T) {
	h := newHarness(t, testConfig())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	be := tcpAddr(srv.Listener.Addr())
	h.declare("web", vip, map[string]string{AnnotationCheck: "http", AnnotationPath: "/healthz"}, be)
	for range 3 {
		h.step(time.Second)
	}
	if row := h.verdict(be, false); row.HealthError() != "HTTP status 500, want 200-399" {
		t.Errorf("last error %q", row.HealthError())
	}
}

// A backend that flaps is re-tripped by one failure on probation, and
// waits twice as long before its next probe; passing probation later
// starts the backoff over.
func TestFlappingBackendBacksOffLonger(t *testing.T) {
	h := newHarness(t, testConfig())
	var status atomic.Int32
	status.Store(http.StatusServiceUnavailable)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(int(status.Load()))
	}))
	defer srv.Close()
	be := tcpAddr(srv.Listener.Addr())
	h.declare("web", vip, map[string]string{AnnotationCheck: "http"}, be)

	for _, s := range []struct {
		status int
		after  time.Duration
	}{
		{503, time.Second}, {503, time.Second}, {503, time.Second}, // trips; backoff 1s
		{200, time.Second},                                         // reopened
		{503, time.Second},                                         // one failure on probation trips it; backoff 2s
		{200, 2 * time.Second},                                     // reopened
		{200, time.Second}, {200, time.Second}, {200, time.Second}, // probation passed
		{503, time.Second}, {503, time.Second}, {503, time.Second}, // trips; backoff 1s again
	} {
		status.Store(int32(s.status))
		h.step(s.after)
	}
	want := `msg="Consecutive failure-accrual breaker tripped" failures=3 last_error="HTTP status 503, want 200-399" probation=false next_probe_in=1s
msg="Consecutive failure-accrual breaker reopened" down_for=1s probation_successes=3
msg="Consecutive failure-accrual breaker tripped" failures=1 last_error="HTTP status 503, want 200-399" probation=true next_probe_in=2s
msg="Consecutive failure-accrual breaker reopened" down_for=2s probation_successes=3
msg="Consecutive failure-accrual breaker closed: probation passed" successes=3
msg="Consecutive failure-accrual breaker tripped" failures=3 last_error="HTTP status 503, want 200-399" probation=false next_probe_in=1s`
	scope := " source=health service=default/web backend=" + be.String()
	if got := h.lines("breaker", "level=INFO ", "", scope, ""); got != want {
		t.Errorf("log:\n%s\nwant:\n%s", got, want)
	}
	if got := h.metric(h.c.metrics.transitions.WithLabelValues("tripped")); got != 3 {
		t.Errorf("tripped %v times, want 3", got)
	}
}

// The only backend of a service keeps taking new flows when it trips:
// health never turns a degraded service into a dead one. Beside a
// healthy backend it takes none.
func TestLoneBackendKeepsServingWhenTripped(t *testing.T) {
	h := newHarness(t, testConfig())
	lone, down := refusingAddr(t), refusingAddr(t)
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	acceptAndClose(t, up)
	h.declare("lone", vip, nil, lone)
	h.declare("pair", "10.96.0.2:80/TCP", nil, down, tcpAddr(up.Addr()))
	for range 3 {
		h.clock.Advance(time.Second)
		for range 3 { // lone, down, up
			h.nextProbe()
		}
	}
	h.verdict(lone, false)
	h.verdict(down, false)
	for fe := range h.w.Frontends().All(h.db.ReadTxn()) {
		var got []string
		for _, b := range fe.Backends {
			got = append(got, fmt.Sprintf("%s %s %d", b.Address, b.State, b.Weight))
		}
		want := map[string]string{
			"default/lone": fmt.Sprintf("%s quarantined 100", lone),
			"default/pair": fmt.Sprintf("%s active 100,%s quarantined 0", tcpAddr(up.Addr()), down),
		}[fe.Service.String()]
		if strings.Join(got, ",") != want {
			t.Errorf("%s: backends %v, want %s", fe.Service, got, want)
		}
	}
}

// A backend shared by two services has one prober: one probe per
// interval, and its log lines name both services.
func TestSharedBackendHasOneProber(t *testing.T) {
	h := newHarness(t, testConfig())
	be := refusingAddr(t)
	h.declare("a", vip, nil, be)
	h.declare("b", "10.96.0.2:80/TCP", nil, be)
	for range 3 {
		h.step(time.Second)
	}
	h.verdict(be, false)
	if got := h.metric(h.c.metrics.probes.WithLabelValues("tcp", resultFailure)); got != 3 {
		t.Errorf("%v probes in three intervals, want 3", got)
	}
	if got := h.lines("tripped"); !strings.Contains(got, "service=default/a,default/b backend="+be.String()) {
		t.Errorf("trip log does not name both services:\n%s", got)
	}
}

// A backend is checked while a frontend lists it: its state series and
// its verdict go when the last frontend does, even though its backend
// row stays.
func TestCheckingStopsWithTheLastFrontend(t *testing.T) {
	h := newHarness(t, testConfig())
	be := refusingAddr(t)
	h.declare("web", vip, nil, be)
	for range 3 {
		h.step(time.Second)
	}
	h.verdict(be, false)
	if n := testutilCount(h, "lbstate_health_breaker_state"); n != 1 {
		t.Fatalf("%d breaker_state series, want 1", n)
	}
	h.write(func(txn statedbWriteTxn) error {
		return h.w.DeleteService(txn, lb.NewServiceName("default", "web"), lb.SourceK8s)
	})
	if row := h.verdict(be, true); row.HealthError() != "" || !row.HealthSince().IsZero() {
		t.Errorf("verdict left on a backend no longer checked: %+v", row.Verdict())
	}
	if n := testutilCount(h, "lbstate_health_breaker_state"); n != 0 {
		t.Errorf("%d breaker_state series left, want 0", n)
	}
	if got := h.lines("no longer checked", be.String(), "BE"); !strings.Contains(got, "backend=BE state=open") {
		t.Errorf("log: %s", got)
	}
}

// An annotation that does not parse is logged with the service and
// counted as rejected input; its setting keeps the node-wide default.
func TestBadAnnotationIsLoggedAndDefaultApplies(t *testing.T) {
	h := newHarness(t, testConfig())
	be := refusingAddr(t)
	h.declare("web", vip, map[string]string{AnnotationInterval: "often"}, be)
	want := `level=WARN msg="Object rejected" source=health error="service default/web: annotation lbstate.io/health-check-interval: \"often\": want a duration of at least 10ms; using the default"`
	if got := h.lines("rejected"); got != want {
		t.Errorf("log:\n%s\nwant:\n%s", got, want)
	}
	if h.src.Errors() != 1 {
		t.Errorf("%d errors counted, want 1", h.src.Errors())
	}
	h.step(time.Second) // the default interval
	// Declaring it again unchanged is not logged again.
	h.declare("web", vip, map[string]string{AnnotationInterval: "often"}, be)
	if h.src.Errors() != 1 {
		t.Errorf("%d errors counted after an unchanged upsert, want 1", h.src.Errors())
	}
}

// A UDP backend is not probed unless its service says how; when it
// does, the probe goes where it says.
func TestUDPBackendProbedOnlyWhenServiceSaysHow(t *testing.T) {
	h := newHarness(t, testConfig())
	refused := refusingAddr(t)
	udp := lb.MustParseL3n4Addr(fmt.Sprintf("127.0.0.1:%d/UDP", refused.Port()))
	h.declare("dns", "10.96.0.10:53/UDP", nil, udp)
	if got := h.metric(h.c.metrics.backends.WithLabelValues("none")); got != 1 {
		t.Fatalf("%v unprobed backends, want 1", got)
	}
	h.declare("dns", "10.96.0.10:53/UDP", map[string]string{AnnotationCheck: "tcp"}, udp)
	if got := h.metric(h.c.metrics.backends.WithLabelValues("tcp")); got != 1 {
		t.Fatalf("%v TCP-probed backends, want 1", got)
	}
	if r := h.step(time.Second); r.addr != udp || describe(r.err) != "connect: connection refused" {
		t.Errorf("probe of %s: %v", r.addr, r.err)
	}
}

// Passive reports trip the breaker of a backend that is not probed, and
// its backoff running out reopens it.
func TestPassiveReportsTripAndBackoffReopens(t *testing.T) {
	h := newHarness(t, testConfig())
	udp := lb.MustParseL3n4Addr("127.0.0.1:53/UDP")
	h.declare("dns", "10.96.0.10:53/UDP", nil, udp)
	h.c.ReportConnection(udp, nil)
	for range 3 {
		h.c.ReportConnection(udp, &net.OpError{Op: "read", Err: fmt.Errorf("connection reset by peer")})
	}
	h.verdict(udp, false)
	h.c.ReportConnection(lb.MustParseL3n4Addr("127.0.0.9:53/UDP"), nil) // not checked here
	h.clock.Advance(time.Second)
	h.verdict(udp, true)
	want := `level=INFO msg="Consecutive failure-accrual breaker tripped" source=health service=default/dns backend=127.0.0.1:53/UDP failures=3 last_error="connection reset by peer" probation=false next_probe_in=1s
level=INFO msg="Consecutive failure-accrual breaker reopened" source=health service=default/dns backend=127.0.0.1:53/UDP down_for=1s probation_successes=3`
	if got := h.lines("breaker"); got != want {
		t.Errorf("log:\n%s\nwant:\n%s", got, want)
	}
	for result, want := range map[string]float64{resultSuccess: 1, resultFailure: 3, resultIgnored: 1} {
		if got := h.metric(h.c.metrics.passive.WithLabelValues(result)); got != want {
			t.Errorf("passive %s: %v, want %v", result, got, want)
		}
	}
}

// At most --health-max-concurrent probes run at once: with one allowed,
// a second backend's probe waits for the first, hanging, one's timeout,
// and its delay is counted.
func TestConcurrentProbesAreBounded(t *testing.T) {
	cfg := testConfig()
	cfg.HealthMaxConcurrent = 1
	h := newHarness(t, cfg)
	a, b := hangingAddr(t), hangingAddr(t)
	h.declare("web", vip, nil, a, b)
	h.clock.Advance(time.Second) // both due
	start := h.clock.Now()
	if !h.clock.waitForCall(start.Add(500 * time.Millisecond)) {
		t.Fatal("no probe started")
	}
	h.clock.Advance(500 * time.Millisecond) // the first times out; the second starts
	first := h.nextProbe()
	if !h.clock.waitForCall(start.Add(time.Second)) {
		t.Fatal("the second probe did not start when the first ended")
	}
	select {
	case r := <-h.probes:
		t.Fatalf("two probes ended at the first timeout (%s, %s)", first.addr, r.addr)
	default:
	}
	h.clock.Advance(500 * time.Millisecond)
	if second := h.nextProbe(); first.addr == second.addr {
		t.Fatalf("one backend probed twice: %s", first.addr)
	}
}
