package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cilium/statedb/reconciler"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// scaleEnv sets the number of Services of the scale scenario (default
// 10,000; each has 10 endpoints).
const scaleEnv = "LBSTATE_E2E_SERVICES"

// Through the real API: Services × 10 endpoints created in parallel all
// reach the maps; then single slice updates reach them quickly. It
// reports the time from the last create until every frontend is in the
// maps, and the latency of one slice update, from the update's request
// to the frontend being in the maps (p50, p99).
func TestManyServicesThroughTheAPIReachTheMaps(t *testing.T) {
	services := 10000
	if s := os.Getenv(scaleEnv); s != "" {
		var err error
		if services, err = strconv.Atoi(s); err != nil {
			t.Fatalf("%s: %v", scaleEnv, err)
		}
	}
	const endpoints = 10
	c := newCluster(t, clusterOptions{})
	n := newNode(t, "node-a")
	// No map size flag: the defaults hold 100,000 services of 10
	// endpoints (each frontend takes 11 entries of lb_services), as
	// kube-proxy needs no flag at any size.
	a := n.startAgent(c)

	start := time.Now()
	parallel(t, 16, services, func(i int) error {
		name := fmt.Sprintf("svc-%d", i)
		_, err := c.kube.CoreV1().Services(c.ns).Create(context.Background(), &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.ns},
			Spec:       corev1.ServiceSpec{Ports: webPorts[:1], Selector: map[string]string{"app": name}},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		_, err = c.kube.DiscoveryV1().EndpointSlices(c.ns).Create(context.Background(), scaleSlice(c.ns, i, endpoints, 0), metav1.CreateOptions{})
		return err
	})
	created := time.Now()
	t.Logf("created %d Services and %d EndpointSlices (%d endpoints each) through the API in %s (%.0f objects/s)",
		services, services, endpoints, created.Sub(start).Round(time.Millisecond), float64(2*services)/created.Sub(start).Seconds())
	eventually(t, 5*time.Minute, func() error {
		done := 0
		for fe := range a.frontends.All(a.db.ReadTxn()) {
			if fe.Status.Kind == reconciler.StatusKindDone && len(fe.Backends) == endpoints {
				done++
			}
		}
		if done < services {
			return fmt.Errorf("%d of %d frontends in the maps with their %d backends", done, services, endpoints)
		}
		return nil
	})
	t.Logf("every frontend in the maps %s after the last create", time.Since(created).Round(time.Millisecond))

	// One slice update at a time, each changing one endpoint.
	svcs, err := c.kube.CoreV1().Services(c.ns).List(context.Background(), metav1.ListOptions{})
	check(t, err)
	ips := map[string]string{}
	for _, s := range svcs.Items {
		ips[s.Name] = s.Spec.ClusterIP
	}
	const updates = 200
	var took []time.Duration
	for u := range updates {
		i := u * (services / updates)
		name := fmt.Sprintf("svc-%d", i)
		addr, err := lb.ParseL3n4Addr(fmtAddr(ips[name], 80, "TCP"))
		check(t, err)
		slice := scaleSlice(c.ns, i, endpoints, u+1)
		old, err := c.kube.DiscoveryV1().EndpointSlices(c.ns).Get(context.Background(), slice.Name, metav1.GetOptions{})
		check(t, err)
		slice.ResourceVersion = old.ResourceVersion
		want := slice.Endpoints[0].Addresses[0] + ":8080"
		sent := time.Now()
		_, err = c.kube.DiscoveryV1().EndpointSlices(c.ns).Update(context.Background(), slice, metav1.UpdateOptions{})
		check(t, err)
		took = append(took, a.waitChange(addr, want, 10*time.Second).Sub(sent))
	}
	slices.Sort(took)
	t.Logf("one EndpointSlice update, from the update's request to the frontend in the maps, over %d updates at %d Services: p50 %s, p99 %s, max %s",
		updates, services, took[len(took)/2].Round(10*time.Microsecond), took[len(took)*99/100].Round(10*time.Microsecond), took[len(took)-1].Round(10*time.Microsecond))
}

// scaleSlice is the EndpointSlice of scale Service i: n ready endpoints,
// the first of which changes with version.
func scaleSlice(ns string, i, n, version int) *discoveryv1.EndpointSlice {
	name := fmt.Sprintf("svc-%d", i)
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name + "-1", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       webSlicePorts[:1],
	}
	for e := range n {
		// No traffic is sent to these: they only fill the maps.
		ip := fmt.Sprintf("10.%d.%d.%d", 128+i/(250*25), (i/25)%250, (i%25)*10+e+1)
		if e == 0 && version > 0 {
			ip = fmt.Sprintf("10.127.%d.%d", version/250, version%250+1)
		}
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: new(true)},
		})
	}
	return s
}

// waitChange waits until the frontend at addr is in the maps with a
// backend at want, and returns when it saw that. It watches the
// frontend's row instead of polling.
func (a *agent) waitChange(addr lb.L3n4Addr, want string, timeout time.Duration) time.Time {
	a.t.Helper()
	deadline := time.After(timeout)
	for {
		fe, _, watch, found := a.frontends.GetWatch(a.db.ReadTxn(), tables.FrontendByAddress.Query(addr))
		now := time.Now()
		if found && fe.Status.Kind == reconciler.StatusKindDone && slices.Contains(activeBackends(fe), want) {
			return now
		}
		select {
		case <-watch:
		case <-deadline:
			a.t.Fatalf("frontend %s: no backend %s in the maps after %s", addr, want, timeout)
		}
	}
}

// parallel runs do(0..n-1) on workers goroutines, failing the test with
// the first error.
func parallel(t testing.TB, workers, n int, do func(i int) error) {
	t.Helper()
	var (
		wg    sync.WaitGroup
		next  = make(chan int)
		errMu sync.Mutex
		first error
	)
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := do(i); err != nil {
					errMu.Lock()
					if first == nil {
						first = err
					}
					errMu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	check(t, first)
}
