package k8s

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/statedb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors/redirectpolicy"
	"github.com/lbstate/lbstate/tables"
)

// Pod churn (a pod turning unready, deleted, re-created with a new IP)
// changes the redirected frontend and the policy's row in one
// transaction: a reader watching every commit never sees one ahead of
// the other. The pod's HostPort frontend is the Kubernetes reflector's,
// a peer of the redirect policies' controller (each applies the pods it
// is fed on its own), so it follows in a transaction of its own: it
// agrees once each step has settled. (A second pod stays ready, so the
// redirect stays and the unready pod is kept in standby.)
func TestPodChurnUpdatesRedirectInOneTransaction(t *testing.T) {
	dyn := installedCRDs(policyObject(t, "169.254.20.10"))
	other := dnsPod()
	other.Name, other.Status.PodIPs = "dns-2", []corev1.PodIP{{IP: "10.0.1.2"}}
	client := fake.NewClientset(other)
	r, w, db, _ := startPolicyReflector(t, client, dyn, policyTest{})
	rows := r.lrp.table
	redirected := lb.MustParseL3n4Addr("169.254.20.10:53/UDP")
	hostPort := lb.MustParseL3n4Addr("0.0.0.0:5300/UDP")

	// view is what one snapshot says of the pods, three ways: "ip state"
	// from the policy's row (and the churning pod's IPs alone), from the
	// redirected frontend, and the IPs from the churning pod's HostPort
	// frontend (which ignores readiness).
	// Entries are in address order.
	view := func(txn statedb.ReadTxn) (row, rowIPs, fe, hp string) {
		var rowEntries, feEntries []string
		if st, _, ok := rows.Get(txn, redirectpolicy.StatusByName.Query("k8s:kube-system/dns")); ok {
			for _, p := range st.Pods {
				rowEntries = append(rowEntries, fmt.Sprintf("%s %s;", p.IPs[0], p.State))
				if p.Name == "dns-1" {
					rowIPs += fmt.Sprintf("%s;", p.IPs[0])
				}
			}
		}
		if f, _, ok := w.Frontends().Get(txn, tables.FrontendByAddress.Query(redirected)); ok {
			for _, b := range f.Backends {
				feEntries = append(feEntries, fmt.Sprintf("%s %s;", b.Address.Addr(), b.State))
			}
		}
		slices.Sort(rowEntries)
		slices.Sort(feEntries)
		row, fe = strings.Join(rowEntries, ""), strings.Join(feEntries, "")
		if f, _, ok := w.Frontends().Get(txn, tables.FrontendByAddress.Query(hostPort)); ok {
			for _, b := range f.Backends {
				hp += fmt.Sprintf("%s;", b.Address.Addr())
			}
		}
		return
	}
	// Every commit to the frontends table is looked at (the reflector
	// commits one batch at a time, each waited for below).
	seen := map[string]bool{}
	check := func() {
		t.Helper()
		row, _, fe, _ := view(db.ReadTxn())
		seen[row] = true
		if row != fe {
			t.Errorf("policy row says %q, redirected frontend %q", row, fe)
		}
	}
	step := func(what string, want string, change func() error) {
		t.Helper()
		_, watch := w.Frontends().AllWatch(db.ReadTxn())
		if err := change(); err != nil {
			t.Fatal(err)
		}
		eventually(t, what, func() bool {
			select {
			case <-watch:
				check()
				_, watch = w.Frontends().AllWatch(db.ReadTxn())
			default:
			}
			row, rowIPs, _, hp := view(db.ReadTxn())
			return row == want && rowIPs == hp
		})
		check()
	}
	eventually(t, "the policy applied to the other pod", func() bool { row, _, _, _ := view(db.ReadTxn()); return row == "10.0.1.2 active;" })
	pods := client.CoreV1().Pods("kube-system")
	ctx := context.Background()
	pod := dnsPod()
	pod.Spec.Containers = []corev1.Container{{Name: "dns", Ports: []corev1.ContainerPort{{ContainerPort: 5353, HostPort: 5300, Protocol: corev1.ProtocolUDP}}}}
	step("the pod redirected to", "10.0.1.1 active;10.0.1.2 active;", func() error { _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); return err })

	unready := pod.DeepCopy()
	unready.Status.Conditions[0].Status = corev1.ConditionFalse
	step("the pod unready", "10.0.1.1 not-ready;10.0.1.2 active;", func() error { _, err := pods.Update(ctx, unready, metav1.UpdateOptions{}); return err })

	step("the pod deleted", "10.0.1.2 active;", func() error { return pods.Delete(ctx, pod.Name, metav1.DeleteOptions{}) })

	again := pod.DeepCopy()
	again.Status.PodIPs = []corev1.PodIP{{IP: "10.0.1.9"}}
	step("the pod re-created with a new IP", "10.0.1.2 active;10.0.1.9 active;", func() error { _, err := pods.Create(ctx, again, metav1.CreateOptions{}); return err })

	if got := slices.Sorted(maps.Keys(seen)); len(got) < 4 {
		t.Errorf("saw %q, want at least the four steps", got)
	}
}
