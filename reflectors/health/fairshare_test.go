package health

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lbstate/lbstate/lb"
)

// hog declares a service whose n backends never accept a connection and
// whose probes may take 30s each.
func (h *harness) hog(n int) []lb.L3n4Addr {
	h.t.Helper()
	bes := make([]lb.L3n4Addr, n)
	for i := range bes {
		bes[i] = hangingAddr(h.t)
	}
	h.declare("hog", "10.96.0.99:80/TCP", map[string]string{AnnotationTimeout: "30s"}, bes...)
	return bes
}

// inflight waits until cond holds of the number of probes under way.
func (h *harness) inflight(what string, cond func(int) bool) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		h.c.mu.Lock()
		n := -1
		if h.c.cur != nil {
			n = h.c.cur.inflight
		}
		h.c.mu.Unlock()
		if cond(n) {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%d probes under way: want %s", n, what)
		}
		time.Sleep(time.Millisecond) // polling, with the deadline above
	}
}

// One service whose backends never answer once held every probe slot
// (--health-max-concurrent), so that another service's dead backends
// stayed "healthy" for minutes. A service now gets only its share of
// the slots: another service's probes run while the hog's hang.
func TestHangingServiceLeavesProbeSlotsToOthers(t *testing.T) {
	cfg := testConfig()
	cfg.HealthMaxConcurrent = 4
	h := newHarness(t, cfg)
	h.hog(10)
	h.clock.Advance(time.Second) // all the hog's probes are due, and hang
	h.inflight("some", func(n int) bool { return n > 0 })

	dead := refusingAddr(t)
	h.declare("web", vip, nil, dead)
	for i := range 3 {
		r := h.step(time.Second)
		if r.addr != dead || describe(r.err) != "connect: connection refused" {
			t.Fatalf("probe %d: %s: %v, want %s refused", i+1, r.addr, r.err, dead)
		}
	}
	h.verdict(dead, false)
}

// Deleting a service ends its probes under way at once: their slots are
// free for others, not held until the probes' timeouts.
func TestDeletedServiceFreesItsProbeSlotsAtOnce(t *testing.T) {
	cfg := testConfig()
	cfg.HealthMaxConcurrent = 4
	h := newHarness(t, cfg)
	h.hog(4)
	h.clock.Advance(time.Second)
	h.inflight("some", func(n int) bool { return n > 0 })
	h.write(func(txn statedbWriteTxn) error {
		return h.w.DeleteService(txn, lb.NewServiceName("default", "hog"), lb.SourceK8s)
	})
	h.inflight("none", func(n int) bool { return n == 0 })
}

// An annotation beyond its documented maximum is an unknown value, as
// one that does not parse: the default applies, and it is reported with
// the service. Once, a timeout of 1000h was accepted silently.
func TestAnnotationAboveItsMaximumKeepsTheDefault(t *testing.T) {
	c, errs := serviceCheck(withAnnotations(map[string]string{
		AnnotationTimeout: "1000h", AnnotationInterval: "1000h",
	}), testDefaults)
	if c != testDefaults {
		t.Errorf("values beyond the maximum changed the check: %+v", c)
	}
	if len(errs) != 2 {
		t.Fatalf("%d errors, want 2: %v", len(errs), errs)
	}
	for _, err := range errs {
		want := fmt.Sprintf("at most %s", maxTimeout)
		if strings.Contains(err.Error(), AnnotationInterval) {
			want = fmt.Sprintf("at most %s", maxInterval)
		}
		if !strings.HasPrefix(err.Error(), "service shop/web: annotation lbstate.io/health-check") || !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name the service and annotation, and say %q", err, want)
		}
	}
	c, errs = serviceCheck(withAnnotations(map[string]string{AnnotationTimeout: maxTimeout.String()}), testDefaults)
	if len(errs) != 0 || c.timeout != maxTimeout {
		t.Errorf("a timeout at the maximum: %+v %v", c, errs)
	}
}

// Slots no other service needs are used: with three services and four
// slots, one whose backends hang holds three, and leaves one, which the
// others' probes take.
func TestBusyServiceUsesTheSlotsOthersLeave(t *testing.T) {
	cfg := testConfig()
	cfg.HealthMaxConcurrent = 4
	h := newHarness(t, cfg)
	a, b := refusingAddr(t), refusingAddr(t)
	h.declare("web", vip, nil, a)
	h.declare("api", "10.96.0.2:80/TCP", nil, b)
	h.hog(4)
	h.clock.Advance(time.Second) // every backend is due
	for range 2 {
		h.nextProbe() // web's and api's
	}
	h.inflight("3 of the hog's", func(n int) bool { return n == 3 })
	for i := range 3 {
		r := h.step(time.Second)
		if r.addr != a && r.addr != b {
			t.Fatalf("probe %d: %s, want web's or api's", i, r.addr)
		}
	}
}
