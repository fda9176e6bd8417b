package routes

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/statedb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/tables"
)

// A route that loses its parent to an older one is reported (a WARN line
// and the source's error counter) once when it starts losing there, not
// again each time the winner comes or goes: 1,000 routes on one Service
// once made deleting their file emit 293 spurious "older" warnings, and
// deleting the winner re-reported all 998 remaining losers.
func TestRouteLosingAParentIsReportedOncePerChangeOfItsOwnState(t *testing.T) {
	const n = 1000
	var logBuf lockedBuffer
	log := slog.New(slog.NewTextHandler(&logBuf, nil))
	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	src, err := reflectors.NewSourceAs(w, "k8s-routes", lb.SourceK8s, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := NewController(src, lb.SourceK8s, nil)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	route := func(i int, port *gwv1.PortNumber) *gwv1.TCPRoute {
		return &gwv1.TCPRoute{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("r%04d", i), CreationTimestamp: metav1.NewTime(start.Add(time.Duration(i) * time.Second))},
			Spec: gwv1.TCPRouteSpec{
				CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{
					{Group: ptrTo(gwv1.Group("")), Kind: ptrTo(gwv1.Kind("Service")), Name: "web", Port: port}}},
				Rules: []gwv1.TCPRouteRule{{BackendRefs: []gwv1.BackendRef{{BackendObjectReference: gwv1.BackendObjectReference{
					Name: gwv1.ObjectName(fmt.Sprintf("b%d", i)), Port: ptrTo(gwv1.PortNumber(80))}}}}},
			},
		}
	}
	apply := func(events ...reflectors.Event) {
		t.Helper()
		for len(events) > 0 {
			k := min(len(events), maxBatch)
			if err := c.apply(events[:k]); err != nil {
				t.Fatal(err)
			}
			events = events[k:]
		}
	}
	reports := func() (warns int, errs uint64) {
		return strings.Count(logBuf.String(), "level=WARN"), src.Errors()
	}
	expect := func(step string, wantWarns int, wantErrs uint64) {
		t.Helper()
		if warns, errs := reports(); warns != wantWarns || errs != wantErrs {
			t.Fatalf("%s: %d WARN lines and %d errors counted, want %d and %d\n%s", step, warns, errs, wantWarns, wantErrs, tail(logBuf.String(), 5))
		}
	}

	var adds []reflectors.Event
	for i := range n {
		adds = append(adds, reflectors.Event{Obj: route(i, nil)})
	}
	apply(adds...)
	expect("1,000 routes added", n-1, n-1) // every route but the oldest loses web

	// The winner goes: the next oldest wins, the others go on losing.
	apply(reflectors.Event{Obj: route(0, nil), Deleted: true})
	expect("the winner deleted", n-1, n-1)

	// A loser moves to port 80, where it still loses: it lost a parent
	// port it did not lose before, its own change, reported once.
	apply(reflectors.Event{Obj: route(500, ptrTo(gwv1.PortNumber(80)))})
	expect("a loser moved to port 80", n, n)

	// An older route comes back: the winner starts losing (reported), the
	// others lose as before.
	apply(reflectors.Event{Obj: route(0, nil)})
	expect("an older route added", n+1, n+1)

	// The file goes, its routes deleted oldest first, 100 a batch, so the
	// winner changes with every batch: nothing more to report.
	for i := 0; i < n; i += 100 {
		var dels []reflectors.Event
		for j := i; j < i+100; j++ {
			dels = append(dels, reflectors.Event{Obj: route(j, nil), Deleted: true})
		}
		apply(dels...)
	}
	expect("every route deleted", n+1, n+1)

	svc, _, ok := w.Services().Get(db.ReadTxn(), tables.ServiceByName.Query(lb.NewServiceName("default", "web")))
	if ok && len(svc.Routes()) != 0 {
		t.Fatalf("web keeps routes after every route was deleted: %v", svc.Routes())
	}
}

// lockedBuffer is a bytes.Buffer a logger may write from any goroutine.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
