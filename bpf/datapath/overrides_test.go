package datapath_test

import (
	"fmt"
	"testing"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/lb"
)

// The overrides, from the Writer through the reconciler to the attached
// datapath, with real connections: a redirect with skip-from-backend
// sends the node's clients and the outside's to the redirect's backend
// (b3), and the redirect's backend's own connections (a socket bound to
// its address) to the service's own backends (b1, b2); a proxy redirect
// on top sends every new connection of the node's to the proxy on
// loopback; clearing both gives the service's own backends back.
func TestOverridesThroughTheWriterReachTheDatapath(t *testing.T) {
	e := newE2E(t)
	web, local := lb.NewServiceName("test", "web"), lb.NewServiceName("test", "web-local")
	bpftest.ServeName(t, e.node, "127.0.0.1", 15001, "proxy")
	e.a.write(func(txn statedb.WriteTxn) error {
		if err := e.a.w.UpsertService(txn, lb.ServiceParams{Name: web, Source: lb.SourceK8s, Frontends: []lb.FrontendParams{
			{Address: lb.MustParseL3n4Addr(clusterIP + ":80/TCP"), Type: lb.SVCTypeClusterIP},
			{Address: lb.MustParseL3n4Addr(lbIP + ":80/TCP"), Type: lb.SVCTypeLoadBalancer},
		}}); err != nil {
			return err
		}
		if err := e.a.w.SetBackends(txn, web, lb.SourceK8s, be("10.1.0.1:8080/TCP", 100), be("10.1.0.2:8080/TCP", 100)); err != nil {
			return err
		}
		if err := e.a.w.SetBackends(txn, local, lb.SourceRedirect, be("10.1.0.3:8080/TCP", 100)); err != nil {
			return err
		}
		return e.a.w.SetRedirect(txn, web, lb.Redirect{Source: lb.SourceRedirect, To: local, SkipFromBackend: true})
	})
	const n = 40
	expect := func(what string, lines []string, want ...string) {
		t.Helper()
		seen := map[string]int{}
		for _, l := range lines {
			seen[l]++
		}
		for _, w := range want {
			if seen[w] == 0 {
				t.Errorf("%s: no %q in %v", what, w, seen)
			}
			delete(seen, w)
		}
		if len(seen) > 0 {
			t.Errorf("%s: unexpected %v", what, seen)
		}
	}
	expect("a node client", bpftest.RunClient(t, e.cg, e.node, fmt.Sprintf("tcpfrom 10.1.0.1 %s:80 %d", clusterIP, n)),
		"b3 "+clusterIP+":80")
	expect("the redirect's backend itself", bpftest.RunClient(t, e.cg, e.node, fmt.Sprintf("tcpfrom 10.1.0.3 %s:80 %d", clusterIP, n)),
		"b1 "+clusterIP+":80", "b2 "+clusterIP+":80")
	expect("an outside client", bpftest.RunClient(t, "", e.outside, fmt.Sprintf("tcp %s:80 %d", lbIP, n)),
		"b3 "+lbIP+":80")

	e.a.write(func(txn statedb.WriteTxn) error {
		return e.a.w.SetProxyRedirect(txn, web, lb.ProxyRedirect{Source: lb.SourceAPI, ProxyPort: 15001})
	})
	expect("a node client, proxied", bpftest.RunClient(t, e.cg, e.node, fmt.Sprintf("tcp %s:80 %d", clusterIP, n)),
		"proxy "+clusterIP+":80")

	e.a.write(func(txn statedb.WriteTxn) error {
		if err := e.a.w.ClearProxyRedirect(txn, web, lb.SourceAPI); err != nil {
			return err
		}
		return e.a.w.ClearRedirect(txn, web, lb.SourceRedirect)
	})
	expect("a node client, no override", bpftest.RunClient(t, e.cg, e.node, fmt.Sprintf("tcp %s:80 %d", clusterIP, n)),
		"b1 "+clusterIP+":80", "b2 "+clusterIP+":80")
}
