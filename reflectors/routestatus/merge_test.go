package routestatus

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func parentStatus(controller, service string) gwv1.RouteParentStatus {
	kind := gwv1.Kind("Service")
	return gwv1.RouteParentStatus{
		ParentRef:      gwv1.ParentReference{Kind: &kind, Name: gwv1.ObjectName(service)},
		ControllerName: gwv1.GatewayController(controller),
		Conditions:     []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted"}},
	}
}

// The API server refuses status.parents longer than 32 entries: ours
// beyond the bound are left out, another controller's never.
func TestStatusParentsNeverExceedTheirBoundAndKeepOtherControllers(t *testing.T) {
	var existing []gwv1.RouteParentStatus
	for i := range 30 {
		existing = append(existing, parentStatus("example.com/other", fmt.Sprintf("other-%d", i)))
	}
	var desired []gwv1.RouteParentStatus
	for i := range 5 {
		desired = append(desired, parentStatus(ControllerName, fmt.Sprintf("ours-%d", i)))
	}
	next, dropped, changed := merge(existing, desired, ControllerName, metav1.Now())
	if !changed || len(next) != maxParents || dropped != 3 {
		t.Fatalf("merge: %d entries, %d dropped, changed %v; want %d, 3, true", len(next), dropped, changed, maxParents)
	}
	for i := range 30 {
		if string(next[i].ControllerName) != "example.com/other" || string(next[i].ParentRef.Name) != fmt.Sprintf("other-%d", i) {
			t.Fatalf("entry %d is %s %s, want the other controller's other-%d", i, next[i].ControllerName, next[i].ParentRef.Name, i)
		}
	}
	for i, want := range []string{"ours-0", "ours-1"} {
		if got := string(next[30+i].ParentRef.Name); got != want {
			t.Errorf("our entry %d is %s, want %s", i, got, want)
		}
	}

	// Within the bound nothing is left out.
	next, dropped, _ = merge(existing[:10], desired, ControllerName, metav1.Now())
	if len(next) != 15 || dropped != 0 {
		t.Errorf("10 + 5 entries: got %d, %d dropped", len(next), dropped)
	}
}
