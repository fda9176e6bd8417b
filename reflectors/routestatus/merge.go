package routestatus

import (
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// merge returns status.parents with controller's entries made desired's:
// entries of other controllers stay as they are, where they are; an
// entry of controller's is updated in place, or removed when its
// parentRef is not desired; new entries go last. A condition whose
// status stays keeps its LastTransitionTime; any other gets now.
// changed is false when the result equals existing, so that nothing is
// written. The API server takes at most maxParents entries: when there
// would be more, controller's last entries are left out (dropped counts
// them), never another controller's.
func merge(existing, desired []gwv1.RouteParentStatus, controller string, now metav1.Time) (next []gwv1.RouteParentStatus, dropped int, changed bool) {
	placed := make([]bool, len(desired))
	next = make([]gwv1.RouteParentStatus, 0, len(existing)+len(desired))
	for _, e := range existing {
		if string(e.ControllerName) != controller {
			next = append(next, e)
			continue
		}
		i := indexOf(desired, e.ParentRef)
		if i < 0 || placed[i] {
			continue // no longer ours, or a duplicate
		}
		placed[i] = true
		next = append(next, withTransitions(desired[i], e.Conditions, now))
	}
	for i, d := range desired {
		if !placed[i] {
			next = append(next, withTransitions(d, nil, now))
		}
	}
	next, dropped = trim(next, controller)
	return next, dropped, !apiequality.Semantic.DeepEqual(existing, next)
}

// maxParents is the Gateway API's bound on status.parents (maxItems).
const maxParents = 32

// trim removes controller's entries from the end of parents until at
// most maxParents are left, and returns how many it removed.
func trim(parents []gwv1.RouteParentStatus, controller string) ([]gwv1.RouteParentStatus, int) {
	dropped := 0
	for i := len(parents) - 1; i >= 0 && len(parents) > maxParents; i-- {
		if string(parents[i].ControllerName) == controller {
			parents = append(parents[:i], parents[i+1:]...)
			dropped++
		}
	}
	return parents, dropped
}

func indexOf(entries []gwv1.RouteParentStatus, ref gwv1.ParentReference) int {
	for i := range entries {
		if apiequality.Semantic.DeepEqual(entries[i].ParentRef, ref) {
			return i
		}
	}
	return -1
}

func withTransitions(d gwv1.RouteParentStatus, old []metav1.Condition, now metav1.Time) gwv1.RouteParentStatus {
	conds := make([]metav1.Condition, len(d.Conditions))
	for i, c := range d.Conditions {
		c.LastTransitionTime = now
		for _, o := range old {
			if o.Type == c.Type && o.Status == c.Status {
				c.LastTransitionTime = o.LastTransitionTime
			}
		}
		conds[i] = c
	}
	d.Conditions = conds
	return d
}

// newerThan reports whether an entry of controller's in existing
// observes a generation newer than generation: another agent saw a newer
// route than this one has, and its status must not be overwritten (the
// Gateway API's rule) until this one catches up.
func newerThan(existing []gwv1.RouteParentStatus, controller string, generation int64) bool {
	for _, e := range existing {
		if string(e.ControllerName) != controller {
			continue
		}
		for _, c := range e.Conditions {
			if c.ObservedGeneration > generation {
				return true
			}
		}
	}
	return false
}
