package tables

import (
	"testing"
	"time"

	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lbstate/lbstate/lb"
)

// claimant is one service's claim on the shared address of these tests.
type claimant struct {
	name    string // ns/name
	source  lb.Source
	typ     lb.SVCType
	claim   lb.Claim
	created time.Time
}

var (
	sharedAddr = lb.MustParseL3n4Addr("192.168.1.10:80/TCP")
	t0         = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
)

func (c claimant) params() lb.ServiceParams {
	return lb.ServiceParams{
		Name: lb.MustParseServiceName(c.name), Source: c.source, Created: c.created,
		Frontends: []lb.FrontendParams{{Address: sharedAddr, Type: c.typ, Claim: c.claim}},
	}
}

// ownerOf declares the claimants one by one, in the order given, and
// returns who owns the shared address, checking that every other
// claimant lists the conflict.
func ownerOf(t *testing.T, claimants ...claimant) string {
	t.Helper()
	w := newTestWriter(t)
	for _, c := range claimants {
		mustWrite(t, w, func(txn statedb.WriteTxn) error { return w.UpsertService(txn, c.params()) })
	}
	txn := w.db.ReadTxn()
	fe, _, found := w.Frontends().Get(txn, FrontendByAddress.Query(sharedAddr))
	if !found {
		t.Fatalf("no frontend at %s", sharedAddr)
	}
	for _, c := range claimants {
		svc, _, _ := w.Services().Get(txn, ServiceByName.Query(lb.MustParseServiceName(c.name)))
		lost := len(svc.Conflicts()) == 1 && svc.Conflicts()[0].Owner == fe.Service
		if (c.name != fe.Service.String()) != lost {
			t.Errorf("%s: conflicts %v while %s owns the address", c.name, svc.Conflicts(), fe.Service)
		}
	}
	return fe.Service.String()
}

// Who owns an address depends on how each service claimed it, then on
// source priority, then on age, and on names only last, whatever the
// order of arrival. (Source priority and then the smaller name once
// decided alone, so the namespaces' alphabetical order chose between a
// LoadBalancer VIP equal to the node's IP and a pod's hostPort on it.)
func TestAddressOwnership(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b claimant // a wins
	}{
		{"an explicit LoadBalancer IP owns the address before a host port on the node's address",
			claimant{"z/lb", lb.SourceK8s, lb.SVCTypeLoadBalancer, lb.ClaimExplicit, t0.Add(time.Hour)},
			claimant{"a/svclb:hostports", lb.SourceK8s, lb.SVCTypeHostPort, lb.ClaimNodeAddress, t0}},
		{"an explicit external IP owns the address before a NodePort outside the reserved range",
			claimant{"z/ext", lb.SourceK8s, lb.SVCTypeExternalIP, lb.ClaimExplicit, t0.Add(time.Hour)},
			claimant{"a/np", lb.SourceK8s, lb.SVCTypeNodePort, lb.ClaimNodeAddress, t0}},
		{"the claim comes before source priority",
			claimant{"z/lb", lb.SourceK8s, lb.SVCTypeLoadBalancer, lb.ClaimExplicit, t0},
			claimant{"a/np", lb.SourceAPI, lb.SVCTypeNodePort, lb.ClaimNodeAddress, t0}},
		{"a NodePort in the reserved range owns the address before a LoadBalancer IP",
			claimant{"z/np", lb.SourceK8s, lb.SVCTypeNodePort, lb.ClaimReservedNodePort, t0.Add(time.Hour)},
			claimant{"a/lb", lb.SourceAPI, lb.SVCTypeLoadBalancer, lb.ClaimExplicit, t0}},
		{"a NodePort in the reserved range owns the address before a host port",
			claimant{"z/np", lb.SourceK8s, lb.SVCTypeNodePort, lb.ClaimReservedNodePort, t0.Add(time.Hour)},
			claimant{"a/hp:hostports", lb.SourceK8s, lb.SVCTypeHostPort, lb.ClaimNodeAddress, t0}},
		{"between explicit claims, source priority",
			claimant{"z/lb", lb.SourceAPI, lb.SVCTypeLoadBalancer, lb.ClaimExplicit, t0.Add(time.Hour)},
			claimant{"a/ext", lb.SourceK8s, lb.SVCTypeExternalIP, lb.ClaimExplicit, t0}},
		{"between expansions, source priority",
			claimant{"z/hp:hostports", lb.SourceFile, lb.SVCTypeHostPort, lb.ClaimNodeAddress, t0.Add(time.Hour)},
			claimant{"a/np", lb.SourceK8s, lb.SVCTypeNodePort, lb.ClaimNodeAddress, t0}},
		{"between equal claims of one source, the older service: renaming a namespace moves nothing",
			claimant{"z/lb", lb.SourceK8s, lb.SVCTypeLoadBalancer, lb.ClaimExplicit, t0},
			claimant{"a/lb", lb.SourceK8s, lb.SVCTypeLoadBalancer, lb.ClaimExplicit, t0.Add(time.Second)}},
		{"a known creation time is older than an unknown one",
			claimant{"z/lb", lb.SourceK8s, lb.SVCTypeLoadBalancer, lb.ClaimExplicit, t0.Add(time.Hour)},
			claimant{"a/lb", lb.SourceK8s, lb.SVCTypeLoadBalancer, lb.ClaimExplicit, time.Time{}}},
		{"the same creation time in another location is no older",
			claimant{"a/lb", lb.SourceK8s, lb.SVCTypeLoadBalancer, lb.ClaimExplicit, t0},
			claimant{"z/lb", lb.SourceK8s, lb.SVCTypeLoadBalancer, lb.ClaimExplicit, t0.In(time.FixedZone("UTC-1", -3600))}},
		{"a Service's ClusterIP before an older redirect policy's address",
			claimant{"z/dns", lb.SourceK8s, lb.SVCTypeClusterIP, lb.ClaimExplicit, t0.Add(time.Hour)},
			claimant{"a/lrp:lrp", lb.SourceK8s, lb.SVCTypeLocalRedirect, lb.ClaimRedirect, t0}},
		{"a host port on the node's address before a redirect policy's address of a higher source",
			claimant{"z/hp:hostports", lb.SourceK8s, lb.SVCTypeHostPort, lb.ClaimNodeAddress, t0.Add(time.Hour)},
			claimant{"a/lrp:lrp", lb.SourceAPI, lb.SVCTypeLocalRedirect, lb.ClaimRedirect, t0}},
		{"between two redirect policies' addresses, the older policy",
			claimant{"z/old:lrp", lb.SourceK8s, lb.SVCTypeLocalRedirect, lb.ClaimRedirect, t0},
			claimant{"a/new:lrp", lb.SourceK8s, lb.SVCTypeLocalRedirect, lb.ClaimRedirect, t0.Add(time.Second)}},
		{"all else equal, the smaller name",
			claimant{"a/lb", lb.SourceK8s, lb.SVCTypeLoadBalancer, lb.ClaimExplicit, time.Time{}},
			claimant{"z/lb", lb.SourceK8s, lb.SVCTypeLoadBalancer, lb.ClaimExplicit, time.Time{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ownerOf(t, tc.a, tc.b); got != tc.a.name {
				t.Errorf("%s then %s: %s owns the address, want %s", tc.a.name, tc.b.name, got, tc.a.name)
			}
			if got := ownerOf(t, tc.b, tc.a); got != tc.a.name {
				t.Errorf("%s then %s: %s owns the address, want %s", tc.b.name, tc.a.name, got, tc.a.name)
			}
		})
	}
}

// The loser of an address keeps its claim and takes the address over
// when the winner goes.
func TestAddressLoserTakesOverWhenWinnerGoes(t *testing.T) {
	w := newTestWriter(t)
	lbSvc := claimant{"z/lb", lb.SourceK8s, lb.SVCTypeLoadBalancer, lb.ClaimExplicit, t0}
	hostPort := claimant{"a/svclb:hostports", lb.SourceK8s, lb.SVCTypeHostPort, lb.ClaimNodeAddress, t0}
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		if err := w.UpsertService(txn, hostPort.params()); err != nil {
			return err
		}
		return w.UpsertService(txn, lbSvc.params())
	})
	owner := func() string {
		fe, _, _ := w.Frontends().Get(w.db.ReadTxn(), FrontendByAddress.Query(sharedAddr))
		return fe.Service.String()
	}
	if got := owner(); got != lbSvc.name {
		t.Fatalf("%s owns the address, want %s", got, lbSvc.name)
	}
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		return w.DeleteService(txn, lb.MustParseServiceName(lbSvc.name), lb.SourceK8s)
	})
	if got := owner(); got != hostPort.name {
		t.Fatalf("after the LoadBalancer went: %s owns the address, want %s", got, hostPort.name)
	}
	svc, _, _ := w.Services().Get(w.db.ReadTxn(), ServiceByName.Query(lb.MustParseServiceName(hostPort.name)))
	if len(svc.Conflicts()) != 0 {
		t.Errorf("the new owner still lists conflicts: %v", svc.Conflicts())
	}
}

// A redirect policy's address waits behind the Service that has it and
// is redirected when the Service lets go.
func TestRedirectAddressTakesOverWhenServiceGoes(t *testing.T) {
	w := newTestWriter(t)
	svc := claimant{"z/dns", lb.SourceK8s, lb.SVCTypeClusterIP, lb.ClaimExplicit, t0.Add(time.Hour)}
	lrp := claimant{"a/lrp:lrp", lb.SourceK8s, lb.SVCTypeLocalRedirect, lb.ClaimRedirect, t0}
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		if err := w.UpsertService(txn, lrp.params()); err != nil {
			return err
		}
		return w.UpsertService(txn, svc.params())
	})
	owner := func() string {
		fe, _, _ := w.Frontends().Get(w.db.ReadTxn(), FrontendByAddress.Query(sharedAddr))
		return fe.Service.String()
	}
	conflicts := NewConflictCollector(w.db, w.Services())
	if got := owner(); got != svc.name {
		t.Fatalf("%s owns the address, want %s", got, svc.name)
	}
	if got := testutil.ToFloat64(conflicts); got != 1 {
		t.Errorf("conflicts gauge = %v while the policy waits, want 1", got)
	}
	mustWrite(t, w, func(txn statedb.WriteTxn) error {
		return w.DeleteService(txn, lb.MustParseServiceName(svc.name), lb.SourceK8s)
	})
	if got := owner(); got != lrp.name {
		t.Fatalf("after the Service went: %s owns the address, want %s", got, lrp.name)
	}
	if got := testutil.ToFloat64(conflicts); got != 0 {
		t.Errorf("conflicts gauge = %v once the policy has the address, want 0", got)
	}
}
