package kubeapi

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// With a Connection, CRDs' informers list and watch through it: a kind's
// list the API server does not answer is retried in place and reported,
// the kind syncs once it answers, and an informer stopped with its CRD
// no longer counts.
func TestCRDsInformersGoThroughTheConnection(t *testing.T) {
	dyn := newFakeDynamic(CRDObject(widgetV1, "Widget", true, "v1"), object(widgetV1, "Widget", "w1"))
	var refusals atomic.Int32
	dyn.PrependReactor("list", widgetV1.Resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		if refusals.Add(1) <= 3 {
			return true, nil, refused("/apis/example.com/v1/widgets")
		}
		return false, nil, nil
	})
	rep := &reports{}
	conn := NewConnection(rep)
	conn.retryMin, conn.retryMax = time.Millisecond, 2*time.Millisecond
	ct := runCRDs(t, dyn, nil, func(c *CRDs) { c.Connection = conn })
	eventually(t, "synced", ct.crds.HasSynced)
	if got := ct.widgets.holds(); got != "ns/w1@example.com/v1" {
		t.Fatalf("widgets hold %q", got)
	}
	eventually(t, "connected", func() bool { return rep.last() == "connected" })
	if n := strings.Count(rep.String(), "disconnected: "); n != 3 {
		t.Errorf("%d disconnections reported for 3 refused lists, want 3:\n%s", n, rep)
	}
	members := func() int {
		conn.mu.Lock()
		defer conn.mu.Unlock()
		return len(conn.members)
	}
	if n := members(); n != 2 {
		t.Fatalf("%d informers counted, want the CRDs' and the widgets'", n)
	}
	deleteCRD(t, dyn, widgetV1)
	eventually(t, "the widgets' informer forgotten", func() bool { return members() == 1 })
}
