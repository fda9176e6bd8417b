package routestatus

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors/routes"
)

// Desired returns lbstate's status.parents entries for a route, one per
// parentRef to a Service, from its row in the routes table; exists says
// whether a backend Service is declared. The conditions carry no
// LastTransitionTime: merge sets it.
func Desired(row *routes.Status, exists func(lb.ServiceName) bool, controller string) []gwv1.RouteParentStatus {
	if len(row.ParentRefs) == 0 {
		return nil
	}
	resolved := resolvedRefs(row, exists)
	out := make([]gwv1.RouteParentStatus, len(row.ParentRefs))
	for i, p := range row.ParentRefs {
		accepted := metav1.Condition{
			Type:               string(gwv1.RouteConditionAccepted),
			Status:             metav1.ConditionTrue,
			Reason:             string(gwv1.RouteReasonAccepted),
			Message:            "The route's split applies on the Service",
			ObservedGeneration: row.Generation,
		}
		if !p.Accepted {
			accepted.Status, accepted.Reason, accepted.Message = metav1.ConditionFalse, p.Reason, truncate(p.Message)
		}
		conds := []metav1.Condition{accepted, resolved}
		if p.Accepted && len(row.DroppedRules) > 0 {
			// The spec's "Drop Rule(s)" approach: set only while accepted,
			// its message starting "Dropped Rule".
			conds = append(conds, metav1.Condition{
				Type:               string(gwv1.RouteConditionPartiallyInvalid),
				Status:             metav1.ConditionTrue,
				Reason:             string(gwv1.RouteReasonUnsupportedValue),
				Message:            truncate("Dropped Rule(s): " + strings.Join(row.DroppedRules, "; ")),
				ObservedGeneration: row.Generation,
			})
		}
		out[i] = gwv1.RouteParentStatus{
			ParentRef:      *p.Ref.DeepCopy(),
			ControllerName: gwv1.GatewayController(controller),
			Conditions:     conds,
		}
	}
	return out
}

// resolvedRefs is the ResolvedRefs condition: the reason of the first
// backendRef (in the order written) that does not resolve, and a message
// naming every one.
func resolvedRefs(row *routes.Status, exists func(lb.ServiceName) bool) metav1.Condition {
	c := metav1.Condition{
		Type:               string(gwv1.RouteConditionResolvedRefs),
		Status:             metav1.ConditionTrue,
		Reason:             string(gwv1.RouteReasonResolvedRefs),
		Message:            "Every backendRef resolves",
		ObservedGeneration: row.Generation,
	}
	var msgs []string
	for _, ref := range row.BackendRefs {
		reason, msg := ref.Reason, ref.Message
		if reason == "" && !exists(ref.Service) {
			reason, msg = string(gwv1.RouteReasonBackendNotFound), ref.Field+": service "+ref.Service.String()+" not found"
		}
		if reason == "" {
			continue
		}
		if len(msgs) == 0 {
			c.Status, c.Reason = metav1.ConditionFalse, reason
		}
		msgs = append(msgs, msg)
	}
	if len(msgs) > 0 {
		c.Message = truncate(strings.Join(msgs, "; "))
	}
	return c
}

// maxMessage is metav1.Condition's limit on Message.
const maxMessage = 32768

func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	return s[:maxMessage-3] + "..."
}
