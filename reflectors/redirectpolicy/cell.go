package redirectpolicy

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/reflectors/kubeapi"
)

// Cell is the local-redirect-policies source: for every feed of the hive
// (kubeapi.FeedsGroup) it runs one source, named FEED-redirect-policies
// and declaring as the feed (k8s, file), that reads
// CiliumLocalRedirectPolicies and this node's Pods (kubeapi.NodeConfig)
// and writes their redirects through the Writer (Controller). It provides
// the local-redirect-policies table (Status rows, for readers as
// statedb.Table[*Status]) and the lrp/* script commands, and its Config
// (--lrp-address-matcher-cidrs). It needs tables.Cell, job.Cell,
// kubeapi.Cell and a cell.Health provider; with metrics.Cell its counters
// are in the hive's registry.
var Cell = cell.Module(
	"redirect-policies",
	"Local redirect policies as redirects of frontends to pods on this node",

	cell.Config(DefaultConfig),
	cell.Provide(
		NewTable,
		func(t statedb.RWTable[*Status]) statedb.Table[*Status] { return t },
		func(db *statedb.DB, t statedb.RWTable[*Status], fes statedb.Table[*lb.Frontend]) hive.ScriptCmdsOut {
			return hive.NewScriptCmds(ScriptCommands(db, t, fes))
		},
	),
	cell.Invoke(registerSources),
)

// Config is the policies' configuration (hive flags).
type Config struct {
	// LRPAddressMatcherCIDRs, when set, are the ranges a local redirect
	// policy's addressMatcher address must be in; empty allows any.
	LRPAddressMatcherCIDRs []string
}

// DefaultConfig allows any address.
var DefaultConfig = Config{}

// Flags registers the configuration's flags.
func (def Config) Flags(flags *pflag.FlagSet) {
	flags.StringSlice("lrp-address-matcher-cidrs", def.LRPAddressMatcherCIDRs, "Ranges a local redirect policy's addressMatcher address must be in (default: any)")
}

// Options parses the settings policies are checked against, naming the
// flag of a bad one.
func (c Config) Options() (Options, error) {
	var opts Options
	for _, s := range c.LRPAddressMatcherCIDRs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return opts, fmt.Errorf("--lrp-address-matcher-cidrs: %q: %w", s, err)
		}
		opts.AddressCIDRs = append(opts.AddressCIDRs, p.Masked())
	}
	return opts, nil
}

// Kinds are the kinds a Controller reads from a feed: policies and the
// Pods of node.
func Kinds(node string) []kubeapi.FeedKind {
	return []kubeapi.FeedKind{
		kubeapi.CRDKind(Kind, []schema.GroupVersionResource{Resource}, AddToScheme, read),
		kubeapi.LocalPods(node),
	}
}

// read reads a policy from the API server; of a deleted one, only the
// name matters.
func read(u *unstructured.Unstructured, deleted bool) (runtime.Object, error) {
	if deleted {
		p := &Policy{}
		p.Namespace, p.Name = u.GetNamespace(), u.GetName()
		return p, nil
	}
	return FromUnstructured(u)
}

type sourceParams struct {
	cell.In

	Source reflectors.Params
	Config Config
	Node   kubeapi.NodeConfig
	Table  statedb.RWTable[*Status]
	Feeds  []kubeapi.Feed `group:"kubernetes-feeds"`
}

func registerSources(p sourceParams) error {
	if len(p.Feeds) == 0 {
		return nil
	}
	opts, err := p.Config.Options()
	if err != nil {
		return err
	}
	node := p.Node.K8sNodeName
	for _, feed := range p.Feeds {
		feed.Want(Kinds(node)...)
		run := func(ctx context.Context, s *reflectors.Source) error {
			c := NewController(opts, node, s, feed.Source(), p.Table)
			return c.Run(ctx, c.Subscribe(feed))
		}
		if err := reflectors.RegisterAs(p.Source, feed.Source().String()+"-redirect-policies", feed.Source(), run); err != nil {
			return err
		}
	}
	return nil
}

// Subscribe returns a feed for Run that subscribes to f's policies and
// this node's pods.
func (c *Controller) Subscribe(f kubeapi.Feed) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		return f.Subscribe(ctx, kubeapi.Subscription{Kinds: Kinds(c.node), Events: c, Invalid: c.fail, Connection: c.src})
	}
}
