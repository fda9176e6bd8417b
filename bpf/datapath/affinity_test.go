package datapath_test

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/bpf/datapath"
	"github.com/lbstate/lbstate/lb"
)

// Session affinity obeys the selection, from the Writer through the
// reconciler to the datapath: a client pinned to a backend before the
// backend stops taking the service's new flows (weight 0, a route that
// hides the service's own backends, terminating, quarantined, maintenance,
// not ready) loses its pin at once (the reconciler removes it), and its
// new flows go elsewhere, all to the one backend of its new pin. The
// backends also serve another service, in which they stay active, so that
// lb_backends shows them active where a change of web's alone would not
// show there.
func TestAffinityPinsFollowTheSelection(t *testing.T) {
	web := lb.NewServiceName("test", "web")
	addrs := []string{"10.1.0.1:8080/TCP", "10.1.0.2:8080/TCP", "10.1.0.3:8080/TCP"}
	// webBackends are web's backends, the pinned one changed by fn.
	webBackends := func(pinned lb.L3n4Addr, fn func(*lb.BackendParams)) []lb.BackendParams {
		var out []lb.BackendParams
		for _, s := range addrs {
			b := be(s, 100)
			if b.Address == pinned {
				fn(&b)
			}
			out = append(out, b)
		}
		return out
	}
	state := func(s lb.BackendState) func(*agent, statedb.WriteTxn, lb.L3n4Addr) error {
		return func(a *agent, txn statedb.WriteTxn, pinned lb.L3n4Addr) error {
			return a.w.SetBackends(txn, web, lb.SourceK8s, webBackends(pinned, func(b *lb.BackendParams) { b.State = s })...)
		}
	}
	for _, c := range []struct {
		name   string
		change func(a *agent, txn statedb.WriteTxn, pinned lb.L3n4Addr) error
	}{
		{"weight 0", func(a *agent, txn statedb.WriteTxn, pinned lb.L3n4Addr) error {
			return a.w.SetBackends(txn, web, lb.SourceK8s, webBackends(pinned, func(b *lb.BackendParams) { b.Weight = 0 })...)
		}},
		{"a route hides the service's own backends", func(a *agent, txn statedb.WriteTxn, _ lb.L3n4Addr) error {
			return a.w.SetRoute(txn, web, lb.Route{Source: lb.SourceK8s, Name: "split", Backends: []lb.RouteBackend{
				{Service: lb.NewServiceName("test", "primary"), Weight: 90},
				{Service: lb.NewServiceName("test", "canary"), Weight: 10},
			}})
		}},
		{"terminating", state(lb.BackendTerminating)},
		{"quarantined", func(a *agent, txn statedb.WriteTxn, pinned lb.L3n4Addr) error {
			return a.w.SetBackendHealth(txn, pinned, false)
		}},
		{"maintenance", state(lb.BackendMaintenance)},
		{"not ready", state(lb.BackendNotReady)},
	} {
		for _, alg := range []lb.Algorithm{lb.AlgorithmRandom, lb.AlgorithmMaglev} {
			t.Run(fmt.Sprintf("%s/%s", c.name, alg), func(t *testing.T) {
				maps := kernelMaps(t, 0)
				a := newAgent(t, maps, datapath.DefaultConfig)
				a.start()
				defer a.stop()
				var bes []lb.BackendParams
				for _, s := range addrs {
					bes = append(bes, be(s, 100))
				}
				a.service("other", alg, []string{"10.96.0.9:80/TCP"}, bes...)
				a.service("primary", alg, []string{"10.96.0.2:80/TCP"}, be("10.2.0.1:8080/TCP", 100))
				a.service("canary", alg, []string{"10.96.0.3:80/TCP"}, be("10.2.0.2:8080/TCP", 100))
				a.write(func(txn statedb.WriteTxn) error {
					if err := a.w.UpsertService(txn, lb.ServiceParams{Name: web, Source: lb.SourceK8s, Algorithm: alg, SessionAffinity: true,
						Frontends: []lb.FrontendParams{{Address: lb.MustParseL3n4Addr("10.96.0.1:80/TCP"), Type: lb.SVCTypeClusterIP}}}); err != nil {
						return err
					}
					return a.w.SetBackends(txn, web, lb.SourceK8s, bes...)
				})
				dp := loadDatapath(t, maps)
				newFlow := func(port int) string {
					f := bpftest.NewFlow(fmt.Sprintf("192.0.2.10:%d", port), "10.96.0.1:80", lb.ProtoTCP)
					verdict, out := bpftest.Send(t, dp.Program("lb_tc_ingress"), f)
					if verdict != 0 {
						t.Fatalf("%v: verdict %d", f, verdict)
					}
					return out.Dst.String() + "/TCP"
				}
				pinned := newFlow(40000)
				for port := 40001; port < 40010; port++ {
					if got := newFlow(port); got != pinned {
						t.Fatalf("before the change, the client's new flows went to %s and %s: no pin", pinned, got)
					}
				}

				a.write(func(txn statedb.WriteTxn) error { return c.change(a, txn, lb.MustParseL3n4Addr(pinned)) })
				pins := affinityPins(t, maps)
				if slices.Contains(pins, pinned) {
					t.Errorf("after the change, lb_affinity still pins the client to %s (pins: %v)", pinned, pins)
				}
				first := newFlow(41000)
				for port := 41000; port < 41020; port++ {
					switch got := newFlow(port); {
					case got == pinned:
						t.Fatalf("a new flow of the pinned client went to %s, which takes no new flows of web", got)
					case got != first:
						t.Fatalf("the client's new flows went to %s and %s: the new pin did not hold", first, got)
					}
				}
				if pins := affinityPins(t, maps); !slices.Equal(pins, []string{first}) {
					t.Errorf("lb_affinity pins the client to %v, want only %s", pins, first)
				}
			})
		}
	}
}

// affinityPins returns the addresses of the backends lb_affinity pins
// client 192.0.2.10 to, for any frontend.
func affinityPins(t *testing.T, maps *bpf.Maps) []string {
	t.Helper()
	var ids []uint32
	if err := maps.Affinity.Iterate(func(k bpf.AffinityKey, v bpf.AffinityValue) bool {
		ids = append(ids, v.BackendID)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, id := range ids {
		b, ok, err := maps.Backends.Lookup(id)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			out = append(out, fmt.Sprintf("backend %d (gone)", id))
			continue
		}
		ap := b.L3n4Addr().AddrPort()
		out = append(out, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()+"/TCP")
	}
	return out
}
