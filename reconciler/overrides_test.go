package reconciler_test

import (
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// While a redirect hides a service's own backends they keep their entries
// and IDs, also across an agent restart, so that clearing the redirect
// (and a proxy redirect on top of it) gives back the maps byte for byte;
// with skip-from-backend they are the fallback slots.
func TestClearingOverridesGivesBackTheMapsAcrossARestart(t *testing.T) {
	onBothMapKinds(t, func(t *testing.T, maps *bpf.Maps, reopen func() *bpf.Maps) {
		web, local := lb.NewServiceName("test", "web"), lb.NewServiceName("test", "web-local")
		declare := func(a *agent) {
			a.write(t, func(txn statedb.WriteTxn) error {
				if err := upsert(a.w, txn, "web", "10.96.7.1:80/TCP", lb.AlgorithmRandom, false, be("10.7.0.1:8080/TCP"), be("10.7.0.2:8080/TCP")); err != nil {
					return err
				}
				return a.w.SetBackends(txn, local, lb.SourceRedirect, be("10.7.9.1:8080/TCP"))
			})
		}
		override := func(a *agent) {
			a.write(t, func(txn statedb.WriteTxn) error {
				if err := a.w.SetRedirect(txn, web, lb.Redirect{Source: lb.SourceRedirect, To: local, SkipFromBackend: true}); err != nil {
					return err
				}
				return a.w.SetProxyRedirect(txn, web, lb.ProxyRedirect{Source: lb.SourceAPI, ProxyPort: 15001})
			})
			a.waitDone(t, 10*time.Second)
		}
		a1 := newAgent(t, maps, nil)
		a1.start(t)
		declare(a1)
		a1.waitDone(t, 10*time.Second)
		before := dumpText(t, maps)
		override(a1)
		during := dumpText(t, maps)
		want := "backend 1 10.7.0.1:8080/TCP active\n" +
			"backend 2 10.7.0.2:8080/TCP active\n" +
			"backend 3 10.7.9.1:8080/TCP active\n" +
			"revnat 1 10.96.7.1:80\n" +
			"service 10.96.7.1:80/TCP master revnat=1 type=ClusterIP algorithm=random count=1 standby=0 fallback=2 proxy-port=15001 flags=redirected,proxy,skip-from-backend\n" +
			"service 10.96.7.1:80/TCP slot=1 backend=3\n" +
			"service 10.96.7.1:80/TCP slot=2 backend=1\n" +
			"service 10.96.7.1:80/TCP slot=3 backend=2\n"
		if during != want {
			t.Fatalf("redirected and proxied:\n%s\nwant:\n%s", during, want)
		}

		// The restarted agent's source has yet to sync: nothing is pruned
		// while it declares everything again.
		a1.stop(t)
		if maps.Kind == "kernel" {
			maps.Close()
		}
		maps2 := reopen()
		a2 := newAgent(t, maps2, nil)
		synced, err := a2.w.RegisterInitializer("k8s")
		if err != nil {
			t.Fatal(err)
		}
		a2.start(t)
		declare(a2)
		override(a2)
		if got := dumpText(t, maps2); got != during {
			t.Fatalf("after the restart:\n%s\nwant:\n%s", got, during)
		}
		a2.write(t, func(txn statedb.WriteTxn) error {
			if err := a2.w.ClearProxyRedirect(txn, web, lb.SourceAPI); err != nil {
				return err
			}
			return a2.w.ClearRedirect(txn, web, lb.SourceRedirect)
		})
		// The redirect's backend, no longer used, goes once the source has
		// synced (until then unused backends are parked).
		a2.write(t, func(txn statedb.WriteTxn) error { synced(txn); return nil })
		deadline := time.Now().Add(10 * time.Second)
		for got := dumpText(t, maps2); got != before; got = dumpText(t, maps2) {
			if time.Now().After(deadline) {
				t.Fatalf("after clearing the overrides:\n%s\nwant, as before them:\n%s", got, before)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}
