package health

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// "Why did backend X stop taking new flows of frontend Y?" The history
// names health, the backend and its tripped breaker with the probe's
// error; and the recovery, when it comes back.
func TestHistoryNamesTheTrippedBreakerThatTookABackendOut(t *testing.T) {
	h := newHarness(t, testConfig())
	down := refusingAddr(t)
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	acceptAndClose(t, up)
	fe := lb.MustParseL3n4Addr("10.96.0.2:80/TCP")
	h.declare("pair", fe.String(), nil, down, tcpAddr(up.Addr()))
	for range 3 {
		h.clock.Advance(time.Second)
		h.nextProbe()
		h.nextProbe()
	}
	h.verdict(down, false)

	deadline := time.Now().Add(10 * time.Second)
	for {
		recs, watch := h.w.History().Records(tables.HistoryQuery{Frontend: fe})
		if n := len(recs); n > 0 {
			r := recs[n-1]
			want := "health " + down.String() + " breaker tripped: connect: connection refused"
			if r.Cause == want {
				changes := strings.Join(r.Changed, "; ")
				if !strings.Contains(changes, "backend "+down.String()+" weight 100 -> 0") ||
					!strings.Contains(changes, "state active -> quarantined") {
					t.Fatalf("what the trip changed: %q", r.Changed)
				}
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no record of the trip by the deadline: %+v", recs)
		}
		select {
		case <-watch:
		case <-time.After(50 * time.Millisecond):
		}
	}
}
