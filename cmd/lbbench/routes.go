package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbstate/lbstate/lb"
	lbreconciler "github.com/lbstate/lbstate/reconciler"
	"github.com/lbstate/lbstate/reflectors/routes"
	"github.com/lbstate/lbstate/tables"
)

// -routes N: N TrafficSplits, each splitting one service (its parent)
// across two others, handed to the Kubernetes reflector as its informer
// would; the time to apply them all, to shift every weight once, and one
// weight change's latency from hand-over to the maps.

type routesResult struct {
	Maps               string  `json:"maps"`
	Services           int     `json:"services"`
	BackendsPerService int     `json:"backends_per_service"`
	Routes             int     `json:"routes"`
	ApplyAllMs         float64 `json:"apply_all_ms"`
	ShiftAllMs         float64 `json:"shift_all_ms"`
	Shifts             int     `json:"shifts"`
	ShiftP50Ms         float64 `json:"shift_p50_ms"`
	ShiftP99Ms         float64 `json:"shift_p99_ms"`
	ShiftMaxMs         float64 `json:"shift_max_ms"`
}

// split is route i: svc-i split between svc-(n+i) (100-canary) and
// svc-(2n+i) (canary).
func split(i, n int, canary int64) *routes.TrafficSplit {
	return &routes.TrafficSplit{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("split-%d", i), Namespace: "bench"},
		Spec: routes.TrafficSplitSpec{Service: fmt.Sprintf("svc-%d", i), Backends: []routes.TrafficSplitBackend{
			{Service: fmt.Sprintf("svc-%d", n+i), Weight: 100 - canary},
			{Service: fmt.Sprintf("svc-%d", 2*n+i), Weight: canary},
		}},
	}
}

// applied waits until svc-i's route gives its canary weight canary.
func (b *bench) applied(i int, canary uint32) error {
	name := lb.NewServiceName("bench", fmt.Sprintf("svc-%d", i))
	timeout := time.After(time.Minute)
	for {
		svc, _, watch, found := b.w.Services().GetWatch(b.db.ReadTxn(), tables.ServiceByName.Query(name))
		if found && len(svc.Routes()) == 1 && len(svc.Routes()[0].Backends) == 2 && svc.Routes()[0].Backends[1].Weight == canary {
			return nil
		}
		select {
		case <-watch:
		case <-timeout:
			return fmt.Errorf("%s: the route did not get canary weight %d in a minute", name, canary)
		}
	}
}

func (b *bench) reconciled() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	return lbreconciler.WaitReconciled(ctx, b.rec, b.frontends.Revision(b.db.ReadTxn()))
}

func runRoutes(o options, out io.Writer) error {
	n := o.routes
	if n < 1 || o.backends < 1 || o.updates < 1 || 3*n > o.services {
		return fmt.Errorf("-routes N needs 1 <= N <= services/3 (%d), and -backends and -updates of at least 1", o.services/3)
	}
	b, err := newBench(o)
	if err != nil {
		return err
	}
	defer b.stop()
	res := routesResult{Maps: b.maps.Kind, Services: o.services, BackendsPerService: o.backends, Routes: n}
	fmt.Fprintf(out, "lbbench -routes %d: %d services x %d backends, %s maps\n", n, o.services, o.backends, b.maps.Kind)
	for i := range o.services {
		svc, es := objects(i, o.backends, 0)
		b.push(svc, false)
		b.push(es, false)
	}
	if err := b.settle(o.services, o.services*o.backends); err != nil {
		return err
	}
	stopProfile, err := startCPUProfile(o.cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

	timeAll := func(canary int64) (time.Duration, error) {
		t0 := time.Now()
		for i := range n {
			b.push(split(i, n, canary), false)
		}
		for i := range n {
			if err := b.applied(i, uint32(canary)); err != nil {
				return 0, err
			}
		}
		err := b.reconciled()
		return time.Since(t0), err
	}
	d, err := timeAll(10)
	if err != nil {
		return err
	}
	res.ApplyAllMs = ms(d)
	if d, err = timeAll(50); err != nil {
		return err
	}
	res.ShiftAllMs = ms(d)
	fmt.Fprintf(out, "all %d routes applied (90/10) in %.1f ms, all shifted to 50/50 in %.1f ms\n", n, res.ApplyAllMs, res.ShiftAllMs)

	var lat []time.Duration
	for u := range o.updates {
		i, canary := u%n, int64(20)
		if b.currentCanary(i) == 20 {
			canary = 30
		}
		t0 := time.Now()
		b.push(split(i, n, canary), false)
		if err := b.applied(i, uint32(canary)); err != nil {
			return err
		}
		if err := b.reconciled(); err != nil {
			return err
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	res.Shifts = len(lat)
	res.ShiftP50Ms, res.ShiftP99Ms, res.ShiftMaxMs = ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100]), ms(lat[len(lat)-1])
	fmt.Fprintf(out, "one weight shift, hand-over to maps: p50 %.2f ms, p99 %.2f ms, max %.2f ms over %d shifts\n",
		res.ShiftP50Ms, res.ShiftP99Ms, res.ShiftMaxMs, res.Shifts)
	if o.json {
		data, err := json.Marshal(res)
		if err != nil {
			return err
		}
		fmt.Fprintln(out, string(data))
	}
	return nil
}

// currentCanary is the canary weight of svc-i's route in force.
func (b *bench) currentCanary(i int) uint32 {
	svc, _, found := b.w.Services().Get(b.db.ReadTxn(), tables.ServiceByName.Query(lb.NewServiceName("bench", fmt.Sprintf("svc-%d", i))))
	if !found || len(svc.Routes()) != 1 || len(svc.Routes()[0].Backends) != 2 {
		return 0
	}
	return svc.Routes()[0].Backends[1].Weight
}
