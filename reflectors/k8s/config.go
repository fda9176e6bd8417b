package k8s

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/lbstate/lbstate/reflectors/kubeapi"
)

// Config is the Kubernetes reflector's configuration: its flags and the
// local node's name.
type Config struct {
	Flags
	// K8sNodeName is the local node's name: kubeapi.NodeConfig's flag
	// (--k8s-node-name), which every source of the hive shares.
	K8sNodeName string
}

// Flags are the services source's hive flags (cell.Config).
type Flags struct {
	// K8sNodeZone, when set, is the local node's zone whatever its Node's
	// zone label says (or when there is no Node).
	K8sNodeZone string
	// K8sLoadBalancerClasses, when set, limits the LoadBalancer ingress
	// IPs served to Services of these loadBalancerClasses (and those
	// without a class). Empty, the default, serves every class, as
	// kube-proxy does.
	K8sLoadBalancerClasses []string
	// K8sNodePortRange is the cluster's node-port range ("FIRST-LAST",
	// as kube-apiserver's --service-node-port-range): inside it a NodePort
	// on a node address owns the address before a LoadBalancer or
	// external IP that equals it.
	K8sNodePortRange string
	// K8sBatchSize and K8sBatchDelay bound a batch of changes applied in
	// one transaction: its objects, an EndpointSlice counting as many as
	// the backends it gives, and how long it waits to fill.
	K8sBatchSize  int
	K8sBatchDelay time.Duration
	// K8sSyncTimeout is how long the source may take to list its world
	// at start before its health is degraded with "not synced after"
	// and the last error (it keeps trying); 0: no deadline.
	K8sSyncTimeout time.Duration
}

// DefaultConfig is the default reflector configuration.
var DefaultConfig = Config{Flags: DefaultFlags, K8sNodeName: kubeapi.DefaultNodeConfig.K8sNodeName}

// DefaultFlags are the default flags.
var DefaultFlags = Flags{
	K8sNodePortRange: DefaultNodePortRange.String(),
	K8sBatchSize:     500,
	K8sBatchDelay:    10 * time.Millisecond,
	K8sSyncTimeout:   2 * time.Minute,
}

// WithNode returns c for the local node named name.
func (c Config) WithNode(name string) Config {
	c.K8sNodeName = name
	return c
}

// Node is the local node's name.
func (c Config) Node() string { return c.K8sNodeName }

// Flags registers the flags.
func (def Flags) Flags(flags *pflag.FlagSet) {
	flags.String("k8s-node-zone", def.K8sNodeZone, "The local node's zone, overriding its Node's "+LabelTopologyZone+" label (empty: the label's)")
	flags.StringSlice("k8s-load-balancer-classes", def.K8sLoadBalancerClasses, "Serve only the LoadBalancer ingress IPs of Services of these loadBalancerClasses (and without a class); default: every class, as kube-proxy")
	flags.String("k8s-node-port-range", def.K8sNodePortRange, "The cluster's node-port range (kube-apiserver's --service-node-port-range), where NodePorts own node addresses before LoadBalancer and external IPs")
	flags.Int("k8s-batch-size", def.K8sBatchSize, "Most Kubernetes changes applied in one transaction (an EndpointSlice counts as many as its backends)")
	flags.Duration("k8s-batch-delay", def.K8sBatchDelay, "Longest wait for a batch of Kubernetes changes to fill")
	flags.Duration("k8s-sync-timeout", def.K8sSyncTimeout, "How long the Kubernetes source may take to list its world at start before its health is degraded (it keeps trying); 0: no deadline")
}

// Validate reports a setting that cannot work, naming its flag.
func (c Config) Validate() error {
	if _, err := ParsePortRange(c.K8sNodePortRange); err != nil {
		return fmt.Errorf("--k8s-node-port-range: %w", err)
	}
	switch {
	case c.K8sNodeName == "":
		return errors.New("--k8s-node-name: empty")
	case c.K8sBatchSize < 1:
		return errors.New("--k8s-batch-size: must be at least 1")
	case c.K8sBatchDelay <= 0:
		return errors.New("--k8s-batch-delay: must be above 0")
	case c.K8sSyncTimeout < 0:
		return errors.New("--k8s-sync-timeout: must not be negative")
	}
	return nil
}
