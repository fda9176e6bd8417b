package tables

import (
	"maps"
	"math"
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
)

// TestRouteArrivalOrder applies a route, its parent, two backend
// services and their backends in every order (720) and checks that the
// frontends come out the same; clearing the route then leaves what the
// same inputs give without it.
func TestRouteArrivalOrder(t *testing.T) {
	var (
		web     = lb.NewServiceName("default", "web")
		primary = lb.NewServiceName("default", "web-primary")
		canary  = lb.NewServiceName("default", "web-canary")
	)
	svc := func(name lb.ServiceName, addr string) func(w *Writer, txn statedb.WriteTxn) error {
		return func(w *Writer, txn statedb.WriteTxn) error {
			return w.UpsertService(txn, lb.ServiceParams{Name: name, Source: lb.SourceK8s,
				Frontends: []lb.FrontendParams{{Address: lb.MustParseL3n4Addr(addr), Type: lb.SVCTypeClusterIP, PortName: "http"}}})
		}
	}
	backends := func(name lb.ServiceName, addrs ...string) func(w *Writer, txn statedb.WriteTxn) error {
		return func(w *Writer, txn statedb.WriteTxn) error {
			bs := make([]lb.BackendParams, len(addrs))
			for i, a := range addrs {
				bs[i] = lb.BackendParams{Address: lb.MustParseL3n4Addr(a), Weight: 100}.WithPortNames("http")
			}
			return w.SetBackends(txn, name, lb.SourceK8s, bs...)
		}
	}
	route := func(w *Writer, txn statedb.WriteTxn) error {
		return w.SetRoute(txn, web, lb.Route{Source: lb.SourceAPI, Name: "r", Backends: []lb.RouteBackend{
			{Service: primary, Weight: 900_000}, {Service: canary, Weight: 100_000}}})
	}
	inputs := []func(w *Writer, txn statedb.WriteTxn) error{
		route,
		svc(web, "10.96.0.1:80/TCP"),
		svc(primary, "10.96.0.2:80/TCP"),
		svc(canary, "10.96.0.3:80/TCP"),
		backends(primary, "10.0.1.1:8080/TCP", "10.0.1.2:8080/TCP", "10.0.1.3:8080/TCP"),
		backends(canary, "10.0.2.1:8080/TCP"),
	}
	unrouted := func() string {
		w := newTestWriter(t)
		mustWrite(t, w, func(txn statedb.WriteTxn) error { return backends(web, "10.0.0.1:8080/TCP")(w, txn) })
		for _, in := range inputs[1:] {
			mustWrite(t, w, func(txn statedb.WriteTxn) error { return in(w, txn) })
		}
		return frontendsDump(w, w.db.ReadTxn())
	}()

	var want string
	order := []int{0, 1, 2, 3, 4, 5}
	permute(order, 0, func(order []int) {
		w := newTestWriter(t)
		mustWrite(t, w, func(txn statedb.WriteTxn) error { return backends(web, "10.0.0.1:8080/TCP")(w, txn) })
		for _, i := range order {
			mustWrite(t, w, func(txn statedb.WriteTxn) error { return inputs[i](w, txn) })
		}
		got := frontendsDump(w, w.db.ReadTxn())
		if want == "" {
			want = got
		} else if got != want {
			t.Fatalf("order %v gives\n%s\nwant\n%s", order, got, want)
		}
		mustWrite(t, w, func(txn statedb.WriteTxn) error { return w.ClearRoute(txn, web, lb.SourceAPI, 0) })
		if got := frontendsDump(w, w.db.ReadTxn()); got != unrouted {
			t.Fatalf("order %v, route cleared:\n%s\nwant\n%s", order, got, unrouted)
		}
	})
	// 90% over three primaries (30% each), 10% to the canary: 3:3:3:1.
	wantRow := "10.96.0.1:80/TCP | ClusterIP | default/web | http | 10.0.1.1:8080/TCP (weight=3), 10.0.1.2:8080/TCP (weight=3), " +
		"10.0.1.3:8080/TCP (weight=3), 10.0.2.1:8080/TCP (weight=1) | route r |  policy=k8s hidden=[10.0.0.1:8080/TCP]\n"
	if got := firstLine(want); got != wantRow {
		t.Fatalf("routed frontend\n%s\nwant\n%s", got, wantRow)
	}
}

func firstLine(s string) string {
	for i := range s {
		if s[i] == '\n' {
			return s[:i+1]
		}
	}
	return s
}

// TestRouteRemovedWithItsSource checks that DeleteSource takes a
// source's routes along and leaves another source's route in force.
func TestRouteRemovedWithItsSource(t *testing.T) {
	w := newTestWriter(t)
	web, a, b := lb.NewServiceName("default", "web"), lb.NewServiceName("default", "a"), lb.NewServiceName("default", "b")
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		if err := w.SetRoute(txn, web, lb.Route{Source: lb.SourceFile, Name: "from-file", Backends: []lb.RouteBackend{{Service: a, Weight: 1}}}); err != nil {
			return err
		}
		return w.SetRoute(txn, web, lb.Route{Source: lb.SourceK8s, Name: "from-k8s", Backends: []lb.RouteBackend{{Service: b, Weight: 1}}})
	})
	svc, _ := w.service(w.db.ReadTxn(), web)
	if r := svc.RouteFor(80); r == nil || r.Name != "from-file" {
		t.Fatalf("route in force %v, want from-file (the higher-priority source)", r)
	}
	mustWrite(t, w, func(txn statedb.WriteTxn) error { return w.DeleteSource(txn, lb.SourceFile) })
	svc, _ = w.service(w.db.ReadTxn(), web)
	if r := svc.RouteFor(80); r == nil || r.Name != "from-k8s" {
		t.Fatalf("route in force %v, want from-k8s", r)
	}
	mustWrite(t, w, func(txn statedb.WriteTxn) error { return w.DeleteSource(txn, lb.SourceK8s) })
	if _, found := w.service(w.db.ReadTxn(), web); found {
		t.Fatal("a service row kept only for routes outlives them")
	}
}

// TestSplitBackends checks the weights a split gives, as exact ratios,
// the share of the services that do not resolve (key "reject") included.
func TestSplitBackends(t *testing.T) {
	ref := func(addr string, w uint16) lb.BackendRef {
		return lb.BackendRef{Address: lb.MustParseL3n4Addr(addr), Weight: w}
	}
	weights := func(refs []lb.BackendRef, rejected uint16) map[string]uint16 {
		m := map[string]uint16{}
		for _, r := range refs {
			m[r.Address.String()] = r.Weight
		}
		if rejected > 0 {
			m["reject"] = rejected
		}
		return m
	}
	tests := []struct {
		name   string
		groups []SplitGroup
		want   map[string]uint16
	}{
		{"one service alone takes all", []SplitGroup{{Weight: 7, Backends: []lb.BackendRef{ref("1.0.0.1:80/TCP", 100)}}},
			map[string]uint16{"1.0.0.1:80/TCP": 1}},
		{"big weights reduce exactly", []SplitGroup{
			{Weight: 1_000_000, Backends: []lb.BackendRef{ref("1.0.0.1:80/TCP", 100)}},
			{Weight: 500_000, Backends: []lb.BackendRef{ref("1.0.0.2:80/TCP", 100)}}},
			map[string]uint16{"1.0.0.1:80/TCP": 2, "1.0.0.2:80/TCP": 1}},
		{"endpoint weights multiply", []SplitGroup{
			{Weight: 1, Backends: []lb.BackendRef{ref("1.0.0.1:80/TCP", 100), ref("1.0.0.2:80/TCP", 200)}},
			{Weight: 1, Backends: []lb.BackendRef{ref("1.0.0.3:80/TCP", 7)}}},
			map[string]uint16{"1.0.0.1:80/TCP": 1, "1.0.0.2:80/TCP": 2, "1.0.0.3:80/TCP": 3}},
		{"zero weight and empty service", []SplitGroup{
			{Weight: 0, Backends: []lb.BackendRef{ref("1.0.0.1:80/TCP", 100)}},
			{Weight: 5},
			{Weight: 1, Backends: []lb.BackendRef{ref("1.0.0.2:80/TCP", 100), ref("1.0.0.3:80/TCP", 0)}}},
			map[string]uint16{"1.0.0.1:80/TCP": 0, "1.0.0.2:80/TCP": 1, "1.0.0.3:80/TCP": 0, "reject": 5}},
		{"a missing service's share is rejected", []SplitGroup{
			{Weight: 90},
			{Weight: 10, Backends: []lb.BackendRef{ref("1.0.0.2:80/TCP", 100)}}},
			map[string]uint16{"1.0.0.2:80/TCP": 1, "reject": 9}},
		{"a service with only standby backends does not resolve", []SplitGroup{
			{Weight: 1, Backends: []lb.BackendRef{ref("1.0.0.1:80/TCP", 0)}},
			{Weight: 3, Backends: []lb.BackendRef{ref("1.0.0.2:80/TCP", 100), ref("1.0.0.3:80/TCP", 300)}}},
			map[string]uint16{"1.0.0.1:80/TCP": 0, "1.0.0.2:80/TCP": 3, "1.0.0.3:80/TCP": 9, "reject": 4}},
		{"nothing resolves: all is rejected", []SplitGroup{{Weight: 2}, {Weight: 3}},
			map[string]uint16{"reject": 1}},
		{"a rejected share scales down with the others", []SplitGroup{
			{Weight: 1},
			{Weight: 1_000_000, Backends: []lb.BackendRef{ref("1.0.0.1:80/TCP", 100)}}},
			map[string]uint16{"1.0.0.1:80/TCP": math.MaxUint16, "reject": 1}},
		{"all zero", []SplitGroup{
			{Weight: 0, Backends: []lb.BackendRef{ref("1.0.0.1:80/TCP", 100)}},
			{Weight: 0, Backends: []lb.BackendRef{ref("1.0.0.2:80/TCP", 100)}}},
			map[string]uint16{"1.0.0.1:80/TCP": 0, "1.0.0.2:80/TCP": 0}},
		{"a backend in two services sums its shares", []SplitGroup{
			{Weight: 1, Backends: []lb.BackendRef{ref("1.0.0.1:80/TCP", 100), ref("1.0.0.2:80/TCP", 100)}},
			{Weight: 1, Backends: []lb.BackendRef{ref("1.0.0.2:80/TCP", 100)}}},
			map[string]uint16{"1.0.0.1:80/TCP": 1, "1.0.0.2:80/TCP": 3}},
		{"beyond 16 bits scales down, keeping every share", []SplitGroup{
			{Weight: 1_000_000, Backends: []lb.BackendRef{ref("1.0.0.1:80/TCP", 100)}},
			{Weight: 1, Backends: []lb.BackendRef{ref("1.0.0.2:80/TCP", 100)}}},
			map[string]uint16{"1.0.0.1:80/TCP": math.MaxUint16, "1.0.0.2:80/TCP": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, rejected := SplitBackends(tt.groups)
			if gotW := weights(got, rejected); !maps.Equal(gotW, tt.want) {
				t.Fatalf("got %v, want %v", gotW, tt.want)
			}
			for i := 1; i < len(got); i++ {
				if compareSelected(got[i-1], got[i]) > 0 {
					t.Fatalf("not sorted: %v", got)
				}
			}
		})
	}
}
