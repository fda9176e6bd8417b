package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/cilium/statedb/reconciler"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbstate/lbstate/lb"
	lbreconciler "github.com/lbstate/lbstate/reconciler"
	"github.com/lbstate/lbstate/reflectors/redirectpolicy"
	"github.com/lbstate/lbstate/tables"
)

// -redirects N: the services loaded, N local redirect policies (policy i
// redirects svc-i's ClusterIP to a pod of its own on this node), applied
// all at once and removed all at once, timed from the hand-over to the
// maps; then the cost of one pod change (a readiness flip: unready, the
// Service falls back to its own backend; ready, it is redirected again),
// from the hand-over until the frontend is reconciled.

type redirectsResult struct {
	Maps         string  `json:"maps"`
	Services     int     `json:"services"`
	Policies     int     `json:"policies"`
	ApplyMs      stats   `json:"apply_ms"`
	RemoveMs     stats   `json:"remove_ms"`
	PodChanges   int     `json:"pod_changes"`
	PodChangeP50 float64 `json:"pod_change_p50_ms"`
	PodChangeP99 float64 `json:"pod_change_p99_ms"`
	PodChangeMax float64 `json:"pod_change_max_ms"`
}

func redirectPolicy(i int) *redirectpolicy.Policy {
	return &redirectpolicy.Policy{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("lrp-%d", i), Namespace: "bench"},
		Spec: redirectpolicy.Spec{
			RedirectFrontend: redirectpolicy.Frontend{ServiceMatcher: &redirectpolicy.ServiceMatcher{ServiceName: fmt.Sprintf("svc-%d", i)}},
			RedirectBackend: redirectpolicy.Backend{
				LocalEndpointSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("lrp-%d", i)}},
				ToPorts:               []redirectpolicy.PortInfo{{Port: "8080", Protocol: "TCP"}},
			},
		},
	}
}

func redirectPod(i int, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Namespace: "bench", Labels: map[string]string{"app": fmt.Sprintf("lrp-%d", i)}},
		Spec:       corev1.PodSpec{NodeName: "bench-node"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: fmt.Sprintf("12.%d.%d.%d", i>>16, (i>>8)&255, i&255)}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

func runRedirects(o options, out io.Writer) error {
	n := o.redirects
	if o.services < 1 || n < 1 || n > o.services || o.updates < 1 || o.iterations < 1 {
		return errors.New("-redirects needs 1 to -services policies, and -updates and -iterations of at least 1")
	}
	o.backends = 1
	b, err := newBench(o)
	if err != nil {
		return err
	}
	defer b.stop()
	res := redirectsResult{Maps: b.maps.Kind, Services: o.services, Policies: n}
	fmt.Fprintf(out, "lbbench -redirects: %d services, %d policies each redirecting one to a pod of its own, %s maps\n", o.services, n, b.maps.Kind)
	// The pods first: once the services are in, they are too.
	for i := range n {
		b.push(redirectPod(i, true), false)
	}
	for i := range o.services {
		svc, es := objects(i, 1, 0)
		b.push(svc, false)
		b.push(es, false)
	}
	if err := b.settle(o.services, o.services); err != nil {
		return err
	}
	policies := make([]*redirectpolicy.Policy, n)
	for i := range n {
		policies[i] = redirectPolicy(i)
	}

	stopProfile, err := startCPUProfile(o.cpuProfile) // of the rounds and the pod changes
	if err != nil {
		return err
	}
	defer stopProfile()
	var applies, removes []float64
	for it := range o.iterations {
		start := time.Now()
		for _, p := range policies {
			b.push(p, false)
		}
		if err := b.settleRedirects(n); err != nil {
			return err
		}
		apply := time.Since(start)
		if it == 0 {
			if err := b.measurePodChanges(o, &res); err != nil {
				return err
			}
		}
		start = time.Now()
		for _, p := range policies {
			b.push(p, true)
		}
		if err := b.settleRedirects(0); err != nil {
			return err
		}
		remove := time.Since(start)
		// The pods' backends leave lb_backends once no frontend names
		// them: after the frontends are written, not with them.
		got := countEntries(b.maps.Backends)
		for deadline := time.Now().Add(time.Minute); got != o.services && time.Now().Before(deadline); got = countEntries(b.maps.Backends) {
			time.Sleep(10 * time.Millisecond)
		}
		if got != o.services {
			return fmt.Errorf("a minute after removing the policies lb_backends has %d entries, want the services' %d", got, o.services)
		}
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		applies, removes = append(applies, ms(apply)), append(removes, ms(remove))
		fmt.Fprintf(out, "  round %d: apply %d policies %s, remove %s\n", it+1, n, apply.Round(time.Millisecond), remove.Round(time.Millisecond))
	}
	res.ApplyMs, res.RemoveMs = summarize(applies), summarize(removes)
	fmt.Fprintf(out, "apply: min %.1f avg %.1f max %.1f ms; remove: min %.1f avg %.1f max %.1f ms\n",
		res.ApplyMs.Min, res.ApplyMs.Avg, res.ApplyMs.Max, res.RemoveMs.Min, res.RemoveMs.Avg, res.RemoveMs.Max)
	fmt.Fprintf(out, "one pod change, hand-over to maps: p50 %.2f ms, p99 %.2f ms, max %.2f ms over %d changes\n",
		res.PodChangeP50, res.PodChangeP99, res.PodChangeMax, res.PodChanges)
	if o.json {
		js, _ := json.Marshal(res)
		fmt.Fprintln(out, string(js))
	}
	return nil
}

// settleRedirects waits until exactly want frontends are redirected and
// the reconciler has written every frontend.
func (b *bench) settleRedirects(want int) error {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		txn := b.db.ReadTxn()
		iter, watch := b.frontends.AllWatch(txn)
		got := 0
		for fe := range iter {
			if !fe.RedirectedTo().IsZero() {
				got++
			}
		}
		if got == want {
			break
		}
		select {
		case <-watch:
		case <-time.After(time.Until(deadline)):
			return fmt.Errorf("%d frontends redirected after 5 minutes, want %d", got, want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	return lbreconciler.WaitReconciled(ctx, b.rec, b.frontends.Revision(b.db.ReadTxn()))
}

// measurePodChanges flips one pod's readiness at a time and times each
// from the hand-over until its Service's frontend is reconciled, falling
// back to the Service's backend or redirected again.
func (b *bench) measurePodChanges(o options, res *redirectsResult) error {
	n := o.redirects
	ready := make([]bool, n)
	for i := range ready {
		ready[i] = true
	}
	var lat []time.Duration
	for u := range o.updates {
		i := (u * 7919) % n
		ready[i] = !ready[i]
		addr := lb.MustParseL3n4Addr(fmt.Sprintf("10.%d.%d.%d:80/TCP", 96+i>>16, (i>>8)&255, i&255))
		pod := redirectPod(i, ready[i])
		start := time.Now()
		b.push(pod, false)
		for {
			fe, _, watch, found := b.frontends.GetWatch(b.db.ReadTxn(), tables.FrontendByAddress.Query(addr))
			if found && fe.Status.Kind == reconciler.StatusKindDone && fe.RedirectedTo().IsZero() != ready[i] {
				break
			}
			select {
			case <-watch:
			case <-time.After(10 * time.Second):
				return fmt.Errorf("pod change %d of %s not reconciled in 10s", u, pod.Name)
			}
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	res.PodChanges = len(lat)
	res.PodChangeP50, res.PodChangeP99, res.PodChangeMax = ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100]), ms(lat[len(lat)-1])
	// Leave every pod ready, as the rounds expect.
	for i := range ready {
		if !ready[i] {
			b.push(redirectPod(i, true), false)
		}
	}
	return b.settleRedirects(n)
}
