package lbstate_test

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/script"
	"github.com/cilium/hive/script/scripttest"
	"github.com/spf13/pflag"

	"github.com/lbstate/lbstate"
	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/bpf/bpftest"
	"github.com/lbstate/lbstate/reflectors/clustermesh"
	"github.com/lbstate/lbstate/reflectors/clustermesh/embedetcd"
	"github.com/lbstate/lbstate/reflectors/k8s"
	"github.com/lbstate/lbstate/reflectors/kubeapi"
	"github.com/lbstate/lbstate/reflectors/redirectpolicy"
	"github.com/lbstate/lbstate/reflectors/routes"
	"github.com/lbstate/lbstate/reflectors/routestatus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

// TestScript runs every testdata/*.txtar script against a fresh hive with
// the whole pipeline (tables, Writer, reconciler, maps), twice: on kernel
// maps pinned in a throwaway bpffs directory, and on in-memory maps, which
// must give the same dumps. Without the privileges for kernel maps that
// half is skipped, unless LBSTATE_REQUIRE_BPF=1 demands it. Scripts use
// statedb's db/* commands and lbstate's lb/* commands.
func TestScript(t *testing.T) {
	t.Run("kernel", func(t *testing.T) {
		bpftest.Require(t)
		scripttest.Test(t, context.Background(), engine(engineFor("kernel")), nil, "testdata/*.txtar")
	})
	t.Run("memory", func(t *testing.T) {
		scripttest.Test(t, context.Background(), engine(engineFor("memory")), nil, "testdata/*.txtar")
	})
}

// TestScriptK8s runs testdata/k8s/*.txtar with the Kubernetes reflector
// watching client-go's fake clientset (and fake dynamic client, for
// CiliumLocalRedirectPolicies and traffic splits, whose CRDs it has
// installed), which the k8s/* commands change; the local node is node-1. As TestScript, on kernel
// maps and on in-memory maps, which must give the same dumps.
func TestScriptK8s(t *testing.T) {
	for _, mode := range []string{"kernel", "memory"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "kernel" {
				bpftest.Require(t)
			}
			scripttest.Test(t, context.Background(), k8sEngine(mode), nil, "testdata/k8s/*.txtar")
		})
	}
}

func k8sEngine(mode string) func(t testing.TB, args []string) *script.Engine {
	return func(t testing.TB, args []string) *script.Engine {
		client := fake.NewClientset()
		dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
			mapsMerge(redirectpolicy.ResourceList, routes.ResourceList, kubeapi.CRDListKinds),
			kubeapi.FakeCRDs(scriptKinds()...)...)
		e := engineFor(mode, cell.Provide(
			func() kubernetes.Interface { return client },
			func() dynamic.Interface { return dyn },
		))(t, args, func(h *hive.Hive) {
			// Scripts see what they write: no route status written
			// back into the fake API server (routestatus's own tests,
			// and e2e, cover it).
			hive.AddConfigOverride(h, func(c *routestatus.Config) { c.RouteStatus = false })
		})
		maps.Insert(e.Cmds, maps.All(kubeapi.ScriptCommands(kubeapi.Clients{Client: client, Dynamic: dyn}, scriptKinds()...)))
		return e
	}
}

// TestScriptClustermesh runs testdata/clustermesh/*.txtar: this cluster
// is c1 (ID 1), with the Kubernetes reflector over the fake clientset as
// in TestScriptK8s, and the clustermesh Cell following a config directory
// that etcd/config-write and etcd/config-remove change. Each script has
// its own embedded etcd, which plays the remote clusters' (kvstore/*
// commands write their services; etcd/stop and etcd/start restart it).
func TestScriptClustermesh(t *testing.T) {
	scripttest.Test(t, context.Background(), func(t testing.TB, args []string) *script.Engine {
		srv, err := embedetcd.Start(t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Stop) // after the hive's
		configDir := t.TempDir()
		client := fake.NewClientset()
		e := engineFor("memory",
			cell.Provide(func() kubernetes.Interface { return client }),
		)(t, args, func(h *hive.Hive) {
			hive.AddConfigOverride(h, func(c *clustermesh.Config) {
				c.ClusterName, c.ClusterID, c.ClustermeshConfig = "c1", 1, configDir
			})
		})
		maps.Insert(e.Cmds, maps.All(kubeapi.ScriptCommands(kubeapi.Clients{Client: client}, scriptKinds()...)))
		maps.Insert(e.Cmds, maps.All(clustermesh.ScriptCommands(srv.ClientConfig())))
		maps.Insert(e.Cmds, maps.All(embedetcd.ScriptCommands(srv, configDir)))
		return e
	}, nil, "testdata/clustermesh/*.txtar")
}

// engineFor returns a new script engine over the agent's hive
// (lbstate.Cell: each source idle until a script's flags, extra or
// configure give it what it needs) and extra; configure, if given, adds
// config overrides.
func engineFor(mode string, extra ...cell.Cell) func(t testing.TB, args []string, configure ...func(*hive.Hive)) *script.Engine {
	return func(t testing.TB, args []string, configure ...func(*hive.Hive)) *script.Engine {
		log := hivetest.Logger(t)
		h := hive.New(append([]cell.Cell{lbstate.Cell}, extra...)...)
		// A script's "#! --flag=value" line sets the hive's flags.
		flags := pflag.NewFlagSet("script", pflag.ContinueOnError)
		h.RegisterFlags(flags)
		if err := flags.Parse(args); err != nil {
			t.Fatalf("flags %q: %v", args, err)
		}
		hive.AddConfigOverride(h, func(c *kubeapi.NodeConfig) { c.K8sNodeName = "node-1" })
		pinDir := ""
		if mode == "kernel" {
			pinDir = filepath.Join(bpftest.PinDir(t), "maps")
		}
		hive.AddConfigOverride(h, func(c *bpf.ModeConfig) { c.LBMaps = mode })
		for _, f := range configure {
			f(h)
		}
		hive.AddConfigOverride(h, func(c *bpf.Config) {
			c.LBPinDir = pinDir
			c.LBMaglevTableSize = 251 // small tables keep dumps and tests quick
			// Every lb/maps-cmp reads the dense ID maps whole, slot by
			// slot: the defaults' 1M + 256K slots cost ~0.3 s of CPU a
			// dump, seconds on a loaded machine, which outlast its 5 s.
			// A script's own --lb-*-max is kept.
			if c.LBBackendsMax == bpf.DefaultConfig.LBBackendsMax {
				c.LBBackendsMax = 1 << 16
			}
			if c.LBRevNatMax == bpf.DefaultConfig.LBRevNatMax {
				c.LBRevNatMax = 1 << 16
			}
		})
		cmds, err := h.ScriptCommands(log)
		if err != nil {
			t.Fatalf("ScriptCommands: %v", err)
		}
		maps.Insert(cmds, maps.All(scripttest.DefaultCmds()))
		t.Cleanup(func() {
			if err := h.Stop(log, context.Background()); err != nil {
				t.Errorf("hive stop: %v", err)
			}
		})
		return &script.Engine{Cmds: cmds, Conds: scripttest.DefaultConds()}
	}
}

func engine(f func(testing.TB, []string, ...func(*hive.Hive)) *script.Engine) func(testing.TB, []string) *script.Engine {
	return func(t testing.TB, args []string) *script.Engine { return f(t, args) }
}

// scriptKinds are the kinds the k8s/* commands apply: those the sources
// of the scripts' hives read.
func scriptKinds() []kubeapi.FeedKind {
	return slices.Concat(k8s.Kinds(k8s.DefaultConfig), redirectpolicy.Kinds(""), routes.Kinds())
}

// mapsMerge returns the union of ms.
func mapsMerge[K comparable, V any](ms ...map[K]V) map[K]V {
	out := map[K]V{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}
