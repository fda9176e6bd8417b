package k8s

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors/redirectpolicy"
)

// The reflector applies local redirect policies over the same store of
// this node's pods that host ports read (r.pods): a pod's change updates
// its HostPort service and every policy's redirect in the same batch, so
// in one transaction.

// preparePolicy records a policy change. An invalid update is reported
// and leaves the policy's last valid version in force.
func (r *Reflector) preparePolicy(p *redirectpolicy.Policy, deleted bool) {
	key := sliceKey{p.Namespace, p.Name}
	if deleted {
		delete(r.policies, key)
		return
	}
	if err := redirectpolicy.Validate(p); err != nil {
		r.fail(err)
		return
	}
	r.policies[key] = p
}

// prepareRedirects returns the calls that bring every policy's redirect
// up to date with the policies and pods, and removes what policies that
// are gone, or lost their frontend, applied before.
func (r *Reflector) prepareRedirects(call func(func(statedb.WriteTxn))) {
	pods := make([]redirectpolicy.Pod, 0, len(r.pods))
	for _, key := range slices.SortedFunc(maps.Keys(r.pods), compareKeys) {
		if pod := r.pods[key]; pod.Spec.NodeName == r.cfg.K8sNodeName { // a manifests directory holds every node's
			pods = append(pods, redirectpolicy.PodOf(pod))
		}
	}
	plans := map[sliceKey]redirectpolicy.Plan{}
	owner := map[lb.ServiceName]sliceKey{} // the policy in force on each redirected Service
	for _, key := range slices.SortedFunc(maps.Keys(r.policies), compareKeys) {
		plan, problems, err := redirectpolicy.Convert(r.policies[key], pods, r.redirectOpts)
		if err != nil {
			r.fail(err) // validated on arrival: only the node's options can make it fail now
			continue
		}
		for _, p := range problems {
			r.fail(p)
		}
		if !plan.Service.IsZero() {
			// The older policy (then the smaller name) keeps a Service;
			// the other waits, reported, and takes over when it goes.
			if prev, taken := owner[plan.Service]; taken {
				winner, loser := prev, key
				if older(plan, plans[prev]) {
					winner, loser = key, prev
				}
				owner[plan.Service] = winner
				r.fail(fmt.Errorf("policy %s/%s: spec.redirectFrontend.serviceMatcher: service %s is redirected by policy %s/%s, which is older",
					loser.namespace, loser.name, plan.Service, winner.namespace, winner.name))
				if loser == prev {
					delete(plans, prev)
				} else {
					continue
				}
			} else {
				owner[plan.Service] = key
			}
		}
		plans[key] = plan
	}
	for _, key := range slices.SortedFunc(maps.Keys(r.applied), compareKeys) {
		old := r.applied[key]
		if next, ok := plans[key]; !ok || next.Service != old.Service {
			call(func(txn statedb.WriteTxn) {
				if !old.Service.IsZero() {
					r.check(r.w.ClearRedirect(txn, old.Service, r.as), old.Service.String())
				}
				if !ok {
					r.check(r.w.DeleteService(txn, old.Target, r.as), old.Target.String())
					r.check(r.w.SetBackends(txn, old.Target, r.as), old.Target.String())
				}
			})
		}
	}
	for _, key := range slices.SortedFunc(maps.Keys(plans), compareKeys) {
		plan := plans[key]
		call(func(txn statedb.WriteTxn) { r.applyPlan(txn, plan) })
	}
	r.applied = plans
	r.src.SetObjects("localredirectpolicies", len(r.policies))
}

// applyPlan declares one policy's target service and backends, and its
// redirect. Writing what did not change costs nothing: the Writer keeps
// rows that are equal.
func (r *Reflector) applyPlan(txn statedb.WriteTxn, plan redirectpolicy.Plan) {
	if len(plan.Frontends) > 0 {
		r.check(r.w.UpsertService(txn, lb.ServiceParams{
			Name: plan.Target, Source: r.as, Frontends: plan.Frontends, Created: plan.Created,
		}), plan.Target.String())
	}
	r.check(r.w.SetBackends(txn, plan.Target, r.as, plan.Backends...), plan.Target.String())
	if !plan.Service.IsZero() {
		r.check(r.w.SetRedirect(txn, plan.Service, lb.Redirect{
			Source: r.as, To: plan.Target, ClusterIPOnly: true, Ports: plan.Ports, SkipFromBackend: plan.SkipFromBackend,
		}), plan.Service.String())
	}
}

// older reports whether a's policy was created before b's, the policies'
// names deciding a tie.
func older(a, b redirectpolicy.Plan) bool {
	if c := a.Created.Compare(b.Created); c != 0 {
		return c < 0
	}
	return a.Policy < b.Policy
}

func compareKeys(a, b sliceKey) int {
	return cmp.Or(cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.name, b.name))
}

// podReadiness keeps the Ready condition of a pod, all that redirects
// read of its conditions.
func podReadiness(conds []corev1.PodCondition) []corev1.PodCondition {
	for _, c := range conds {
		if c.Type == corev1.PodReady {
			return []corev1.PodCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return nil
}
