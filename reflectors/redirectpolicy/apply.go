package redirectpolicy

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors/kubeapi"
	"github.com/lbstate/lbstate/tables"
)

// The controller applies local redirect policies over this node's pods: a
// pod's change updates the redirects of the policies that select it
// (before or after the change) and their status rows in one transaction.
// Only the policies a change concerns are converted again.

// redirects is what the reflector keeps of local redirect policies.
type redirects struct {
	opts Options

	policies map[objKey]*policyState
	// rulesByLabel and podsByLabel index a namespace's policies by their
	// IndexLabel ("" for those without matchLabels) and its pods by each
	// of their labels, so that a new policy or new pod labels are matched
	// against the candidates only.
	rulesByLabel map[nsLabel]map[objKey]struct{}
	podsByLabel  map[nsLabel]map[string]struct{}
	bySvc        map[lb.ServiceName]map[objKey]struct{} // the serviceMatcher policies of each Service
	pods         map[string]map[string]*Pod             // this node's pods, by namespace and name
	// selects and selectedBy say which pods each policy's selector
	// matches (by namespace and labels alone), both ways: a pod change
	// that keeps its labels concerns only the policies that select it,
	// and a policy is converted over its own pods only.
	selects    map[objKey]map[string]struct{} // policy -> names of its namespace's pods
	selectedBy map[objKey]map[objKey]struct{} // pod -> policies
	dirty      map[objKey]bool                // policies to convert again
	affected   map[lb.ServiceName]bool        // Services whose winning policy to decide again
}

// nsLabel is a namespace and a "key=value" label.
type nsLabel struct{ namespace, label string }

// policyState is one policy.
type policyState struct {
	latest   *Policy // the latest version (nil once deleted)
	rule     *Rule   // the last valid version, or nil
	err      error   // why the latest version was rejected
	plan     Plan    // rule's plan over the pods
	problems []error
	lostTo   string         // the older policy that has the same Service
	lostOn   lb.ServiceName // that Service
	applied  *Plan          // what the Writer has of it
}

// origin is where a manifest declares the policy in force (else its
// latest version), for its errors: "" if none.
func (ps *policyState) origin() string {
	if ps.rule != nil {
		return kubeapi.Origin(ps.rule.Policy())
	}
	return kubeapi.Origin(ps.latest)
}

func newRedirects(opts Options) *redirects {
	return &redirects{
		opts: opts, policies: map[objKey]*policyState{},
		rulesByLabel: map[nsLabel]map[objKey]struct{}{}, podsByLabel: map[nsLabel]map[string]struct{}{},
		bySvc: map[lb.ServiceName]map[objKey]struct{}{}, pods: map[string]map[string]*Pod{},
		selects: map[objKey]map[string]struct{}{}, selectedBy: map[objKey]map[objKey]struct{}{},
		dirty: map[objKey]bool{}, affected: map[lb.ServiceName]bool{},
	}
}

// preparePolicy records a policy change. An invalid update is reported
// and leaves the policy's last valid version in force.
func (c *Controller) preparePolicy(p *Policy, deleted bool) {
	l := c.l
	key := objKey{p.Namespace, p.Name}
	ps := l.policies[key]
	if ps == nil {
		if deleted {
			return
		}
		ps = &policyState{}
		l.policies[key] = ps
	}
	l.dirty[key] = true
	if deleted {
		ps.latest = nil
		ps.setRule(l, key, nil)
		return
	}
	ps.latest = p
	rule, err := Compile(p, l.opts)
	if ps.err = err; err != nil {
		c.fail(kubeapi.AtOrigin(p, err))
		return
	}
	ps.setRule(l, key, rule)
}

// setRule puts a new valid version in force, moving the policy between
// the Services it redirects.
func (ps *policyState) setRule(l *redirects, key objKey, rule *Rule) {
	if old := ps.rule; old != nil {
		if !old.Service().IsZero() {
			l.affected[old.Service()] = true
			delete(l.bySvc[old.Service()], key)
		}
		delete(l.rulesByLabel[nsLabel{key.namespace, old.IndexLabel()}], key)
	}
	ps.rule = rule
	if rule != nil {
		if !rule.Service().IsZero() {
			l.affected[rule.Service()] = true
			addTo(l.bySvc, rule.Service(), key)
		}
		addTo(l.rulesByLabel, nsLabel{key.namespace, rule.IndexLabel()}, key)
	}
	for name := range l.selects[key] {
		delete(l.selectedBy[objKey{key.namespace, name}], key)
	}
	delete(l.selects, key)
	if rule == nil {
		return
	}
	check := func(name string) {
		if rule.Selects(l.pods[key.namespace][name]) {
			l.markSelected(key, objKey{key.namespace, name})
		}
	}
	if label := rule.IndexLabel(); label != "" {
		for name := range l.podsByLabel[nsLabel{key.namespace, label}] {
			check(name)
		}
		return
	}
	for name := range l.pods[key.namespace] {
		check(name)
	}
}

// markSelected records that a policy's selector matches a pod.
func (l *redirects) markSelected(policy, pod objKey) {
	if l.selects[policy] == nil {
		l.selects[policy] = map[string]struct{}{}
	}
	l.selects[policy][pod.name] = struct{}{}
	addTo(l.selectedBy, pod, policy)
}

// preparePodRedirects records a pod change for redirects: the policies
// that select it, before or after, are converted again.
func (c *Controller) preparePodRedirects(pod *corev1.Pod, deleted bool) {
	l := c.l
	var next *Pod
	if !deleted && pod.Spec.NodeName == c.node { // a manifests directory holds every node's
		p := PodOf(pod)
		next = &p
	}
	prev := l.pods[pod.Namespace][pod.Name]
	switch {
	case prev == nil && next == nil:
		return
	case prev != nil && next != nil && prev.Equal(next):
		return
	case next == nil:
		delete(l.pods[pod.Namespace], pod.Name)
	default:
		if l.pods[pod.Namespace] == nil {
			l.pods[pod.Namespace] = map[string]*Pod{}
		}
		l.pods[pod.Namespace][pod.Name] = next
	}
	podKey := objKey{pod.Namespace, pod.Name}
	for key := range l.selectedBy[podKey] { // the policies that selected it
		l.dirty[key] = true
	}
	if prev != nil && next != nil && maps.Equal(prev.Labels, next.Labels) {
		return // the same policies select it
	}
	for key := range l.selectedBy[podKey] {
		delete(l.selects[key], pod.Name)
	}
	delete(l.selectedBy, podKey)
	if prev != nil {
		for k, v := range prev.Labels {
			delete(l.podsByLabel[nsLabel{pod.Namespace, k + "=" + v}], pod.Name)
		}
	}
	if next == nil {
		return
	}
	check := func(key objKey) {
		if rule := l.policies[key].rule; rule != nil && rule.Selects(next) {
			l.markSelected(key, podKey)
			l.dirty[key] = true
		}
	}
	for key := range l.rulesByLabel[nsLabel{pod.Namespace, ""}] {
		check(key)
	}
	for k, v := range next.Labels {
		label := nsLabel{pod.Namespace, k + "=" + v}
		if l.podsByLabel[label] == nil {
			l.podsByLabel[label] = map[string]struct{}{}
		}
		l.podsByLabel[label][pod.Name] = struct{}{}
		for key := range l.rulesByLabel[label] {
			check(key)
		}
	}
}

// podsOf returns the pods a policy selects, in name order.
func (l *redirects) podsOf(key objKey) []Pod {
	pods := make([]Pod, 0, len(l.selects[key]))
	for _, name := range slices.Sorted(maps.Keys(l.selects[key])) {
		pods = append(pods, *l.pods[key.namespace][name])
	}
	return pods
}

// prepareRedirects returns the calls that bring the redirects of the
// policies that changed (or whose pods did) up to date: first every
// redirect that goes, then every one that is set, so that a policy
// taking a Service over from another in the same batch keeps it.
func (c *Controller) prepareRedirects(call func(func(statedb.WriteTxn))) {
	l := c.l
	if len(l.dirty) == 0 && len(l.affected) == 0 {
		return
	}
	changed := l.dirty
	for key := range l.dirty {
		ps := l.policies[key]
		if ps.rule == nil {
			ps.plan, ps.problems = Plan{}, nil
			continue
		}
		plan, problems := ps.rule.Convert(l.podsOf(key))
		// Each problem (a pod lacking a port, a frontend port the backend
		// lacks) is logged and counted once, when it appears: not again
		// at every pod event, nor when another problem comes or goes.
		if len(problems) > 0 {
			seen := make(map[string]bool, len(ps.problems))
			for _, q := range ps.problems {
				seen[q.Error()] = true
			}
			for _, p := range problems {
				if !seen[p.Error()] {
					c.fail(kubeapi.AtOrigin(ps.rule.Policy(), p))
				}
			}
		}
		ps.plan, ps.problems = plan, problems
	}
	// Of the policies on one Service, the older (then the smaller name)
	// has it; the others wait, reported, and take over when it goes.
	for _, svc := range slices.SortedFunc(maps.Keys(l.affected), lb.ServiceName.Compare) {
		var winner *policyState
		var winnerKey objKey
		for key := range l.bySvc[svc] {
			if ps := l.policies[key]; winner == nil || older(ps, key, winner, winnerKey) {
				winner, winnerKey = ps, key
			}
		}
		for key := range l.bySvc[svc] {
			lostTo := ""
			if key != winnerKey {
				lostTo = winnerKey.namespace + "/" + winnerKey.name
			}
			if ps := l.policies[key]; ps.lostTo != lostTo {
				// Reported when it starts to lose a Service, not when
				// the winner changes: that is not a change of its own
				// (its row names the new winner).
				if lostTo != "" && (ps.lostTo == "" || ps.lostOn != svc) {
					c.fail(kubeapi.AtOriginOf(ps.origin(), fmt.Errorf("policy %s/%s: spec.redirectFrontend.serviceMatcher: service %s is redirected by policy %s, which is older",
						key.namespace, key.name, svc, lostTo)))
				}
				ps.lostTo, ps.lostOn = lostTo, svc
				changed[key] = true
			}
		}
		if len(l.bySvc[svc]) == 0 {
			delete(l.bySvc, svc)
		}
	}
	keys := slices.SortedFunc(maps.Keys(changed), compareKeys)
	for _, key := range keys {
		ps := l.policies[key]
		old := ps.applied
		next := ps.inForce()
		if old == nil || (next != nil && next.Service == old.Service) {
			continue
		}
		cause := c.policyCause(key, "")
		if next == nil {
			cause = c.policyCause(key, "no longer in force")
		}
		call(func(txn statedb.WriteTxn) {
			c.w.SetCause(txn, cause)
			if !old.Service.IsZero() {
				c.check(c.w.ClearRedirect(txn, old.Service, c.as), old.Service.String())
			}
			if next == nil {
				c.check(c.w.DeleteService(txn, old.Target, c.as), old.Target.String())
				c.check(c.w.SetBackends(txn, old.Target, c.as), old.Target.String())
			}
		})
	}
	for _, key := range keys {
		ps := l.policies[key]
		ps.applied = ps.inForce()
		if plan := ps.applied; plan != nil {
			cause := c.policyCause(key, "")
			call(func(txn statedb.WriteTxn) { c.w.SetCause(txn, cause); c.applyPlan(txn, *plan) })
		}
		if c.table != nil {
			var row *Status
			if ps.latest != nil {
				row = StatusOf(c.as, ps.latest, ps.rule, ps.plan, ps.problems, ps.lostTo, ps.err)
			}
			name := key.namespace + "/" + key.name
			call(func(txn statedb.WriteTxn) {
				if row != nil {
					_, _, err := c.table.Insert(txn, row)
					c.check(err, "policy "+name)
				} else {
					_, _, err := c.table.Delete(txn, &Status{Source: c.as, Name: name})
					c.check(err, "policy "+name)
				}
			})
		}
		if ps.latest == nil {
			delete(l.policies, key)
		}
	}
	l.dirty, l.affected = map[objKey]bool{}, map[lb.ServiceName]bool{}
	c.src.SetObjects("localredirectpolicies", len(l.policies))
}

// inForce is the plan the Writer should have: none for a policy deleted,
// never valid, waiting for an older one on its Service, or without a pod
// that takes new flows.
func (ps *policyState) inForce() *Plan {
	if ps.latest == nil || ps.rule == nil || ps.lostTo != "" || !ps.plan.Serving {
		return nil
	}
	plan := ps.plan
	return &plan
}

// applyPlan declares one policy's target service and backends, and its
// redirect. Writing what did not change costs nothing: the Writer keeps
// rows that are equal.
func (c *Controller) applyPlan(txn statedb.WriteTxn, plan Plan) {
	if len(plan.Frontends) > 0 {
		c.check(c.w.UpsertService(txn, lb.ServiceParams{
			Name: plan.Target, Source: c.as, Frontends: plan.Frontends, Created: plan.Created,
		}), plan.Target.String())
	}
	c.check(c.w.SetBackends(txn, plan.Target, c.as, plan.Backends...), plan.Target.String())
	if !plan.Service.IsZero() {
		c.check(c.w.SetRedirect(txn, plan.Service, lb.Redirect{
			Source: c.as, To: plan.Target, ClusterIPOnly: true, Ports: plan.Ports, SkipFromBackend: plan.SkipFromBackend,
		}), plan.Service.String())
	}
}

// sweepPolicyRows removes the status rows of this source's policies that
// the reflector does not hold (a run that started over has not seen them
// deleted).
func (c *Controller) sweepPolicyRows(txn statedb.WriteTxn) {
	if c.table == nil {
		return
	}
	for row := range c.table.All(txn) {
		if row.Source != c.as {
			continue
		}
		ns, name, _ := cut(row.Name)
		if _, ok := c.l.policies[objKey{ns, name}]; !ok {
			_, _, err := c.table.Delete(txn, row)
			c.check(err, "policy "+row.Name)
		}
	}
}

// older reports whether a's policy was created before b's, the policies'
// names deciding a tie.
func older(a *policyState, ak objKey, b *policyState, bk objKey) bool {
	if c := a.latest.CreationTimestamp.Time.Compare(b.latest.CreationTimestamp.Time); c != 0 {
		return c < 0
	}
	return compareKeys(ak, bk) < 0
}

func compareKeys(a, b objKey) int {
	return cmp.Or(cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.name, b.name))
}

func addTo[K comparable](m map[K]map[objKey]struct{}, k K, key objKey) {
	if m[k] == nil {
		m[k] = map[objKey]struct{}{}
	}
	m[k][key] = struct{}{}
}

// cut splits "namespace/name".
func cut(s string) (ns, name string, ok bool) {
	for i := range len(s) {
		if s[i] == '/' {
			return s[:i], s[i+1:], true
		}
	}
	return "", s, false
}

// policyCause is what the history says a policy's write applies.
func (c *Controller) policyCause(key objKey, detail string) *tables.Cause {
	return &tables.Cause{Source: c.as.String(), Kind: "CiliumLocalRedirectPolicy", Namespace: key.namespace, Name: key.name, Detail: detail}
}
