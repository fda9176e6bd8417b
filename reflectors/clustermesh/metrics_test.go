package clustermesh

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Per remote cluster, the collector reports the age of the last contact
// beside the stale timeout; for a cluster never reached, the time since
// it was added; and nothing before the importer runs.
func TestRemoteMetricsReportLastContactAndStaleTimeout(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	rc := &remoteCollector{now: func() time.Time { return now }}
	if n := testutil.CollectAndCount(rc); n != 0 {
		t.Fatalf("%d series before the importer runs, want none", n)
	}
	im, err := NewImporter(Self{Name: "c1", ID: 1})
	if err != nil {
		t.Fatal(err)
	}
	im.clusters["c2"] = &cluster{remote: Remote{Name: "c2", StaleTimeout: time.Minute}, lastContact: now.Add(-10 * time.Second), added: now.Add(-time.Hour)}
	im.clusters["c3"] = &cluster{remote: Remote{Name: "c3"}, added: now.Add(-5 * time.Second)}
	rc.follow(im)
	want := `# HELP lbstate_clustermesh_remote_last_contact_seconds Seconds since each remote cluster's etcd last answered (a watch event or a heartbeat); since the cluster was added when it never has
# TYPE lbstate_clustermesh_remote_last_contact_seconds gauge
lbstate_clustermesh_remote_last_contact_seconds{cluster="c2"} 10
lbstate_clustermesh_remote_last_contact_seconds{cluster="c3"} 5
# HELP lbstate_clustermesh_remote_stale_timeout_seconds Each remote cluster's stale timeout: once its last contact is older, its backends are removed
# TYPE lbstate_clustermesh_remote_stale_timeout_seconds gauge
lbstate_clustermesh_remote_stale_timeout_seconds{cluster="c2"} 60
lbstate_clustermesh_remote_stale_timeout_seconds{cluster="c3"} 30
`
	if err := testutil.CollectAndCompare(rc, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}
