package tables

import (
	"math"
	"strings"
	"testing"

	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbstate/lbstate/lb"
)

// lbstate_frontend_backend_weight gives, per frontend, each selected
// backend's weight, state and route: under a 90/10 route the canary's
// backends hold 10% of the frontend's weight, named by the route, and a
// terminating backend shows with weight 0.
func TestBackendWeightMetricShowsTheRouteSplitAndStates(t *testing.T) {
	w := newTestWriter(t)
	web, primary, canary := lb.NewServiceName("default", "web"), lb.NewServiceName("default", "primary"), lb.NewServiceName("default", "canary")
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		for i, n := range []lb.ServiceName{web, primary, canary} {
			if err := w.UpsertService(txn, lb.ServiceParams{Name: n, Source: lb.SourceK8s, Frontends: []lb.FrontendParams{
				{Address: lb.MustParseL3n4Addr("10.96.0." + string(rune('1'+i)) + ":80/TCP"), Type: lb.SVCTypeClusterIP}}}); err != nil {
				return err
			}
		}
		if err := w.SetBackends(txn, primary, lb.SourceK8s,
			lb.BackendParams{Address: lb.MustParseL3n4Addr("10.0.1.1:8080/TCP"), Weight: 100},
			lb.BackendParams{Address: lb.MustParseL3n4Addr("10.0.1.2:8080/TCP"), Weight: 100},
			lb.BackendParams{Address: lb.MustParseL3n4Addr("10.0.1.3:8080/TCP"), Weight: 100, State: lb.BackendTerminating}); err != nil {
			return err
		}
		if err := w.SetBackends(txn, canary, lb.SourceK8s, lb.BackendParams{Address: lb.MustParseL3n4Addr("10.0.2.1:8080/TCP"), Weight: 100}); err != nil {
			return err
		}
		return w.SetRoute(txn, web, lb.Route{Source: lb.SourceK8s, Name: "split", Backends: []lb.RouteBackend{
			{Service: primary, Weight: 90}, {Service: canary, Weight: 10}}})
	})

	weights := map[string]float64{} // backend → weight, in web's frontend
	states := map[string]string{}
	for _, m := range collect(t, NewBackendWeightCollector(w.db, w.Frontends())) {
		l := m.labels
		if l["frontend"] != "10.96.0.1:80/TCP" {
			continue
		}
		if l["route"] != "split" || l["service_name"] != "web" || l["backend_cluster"] != "0" {
			t.Errorf("series %v: want route=split, service_name=web, backend_cluster=0", l)
		}
		weights[l["backend"]], states[l["backend"]] = m.value, l["state"]
	}
	if len(weights) != 4 {
		t.Fatalf("web's series: %v, want its four routed backends", weights)
	}
	if w, s := weights["10.0.1.3:8080/TCP"], states["10.0.1.3:8080/TCP"]; w != 0 || s != "terminating" {
		t.Errorf("the terminating backend: weight %v, state %q; want 0, terminating", w, s)
	}
	var total float64
	for _, v := range weights {
		total += v
	}
	if share := weights["10.0.2.1:8080/TCP"] / total; math.Abs(share-0.1) > 0.005 || states["10.0.2.1:8080/TCP"] != "active" {
		t.Errorf("the canary's share of web's weight is %.4f (%v), want 0.1", share, weights)
	}
}

// sample is one gathered series.
type sample struct {
	labels map[string]string
	value  float64
}

func collect(t *testing.T, c prometheus.Collector) []sample {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []sample
	for _, mf := range mfs {
		if !strings.HasSuffix(mf.GetName(), "_frontend_backend_weight") {
			t.Fatalf("unexpected family %s", mf.GetName())
		}
		for _, m := range mf.GetMetric() {
			s := sample{labels: map[string]string{}, value: m.GetGauge().GetValue()}
			for _, p := range m.GetLabel() {
				s.labels[p.GetName()] = p.GetValue()
			}
			out = append(out, s)
		}
	}
	return out
}
